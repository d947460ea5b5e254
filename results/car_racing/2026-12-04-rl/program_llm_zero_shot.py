import math

import torch
import torch.nn as nn


class RacecarPolicy(nn.Module):
    """Pure-pursuit steering on a speed-dependent look-ahead point built from the
    tiles ahead, plus a curvature-scheduled target speed tracked by gas/brake with
    rear-wheel traction control."""

    # --- geometry constants (CarRacing in task units: half-width 0.2, tile 0.105) ---
    # Wheelbase: CarRacing wheels sit at y=+80 and y=-82 hull units (SIZE=0.02), i.e.
    # 3.24 world units; track half-width is 40/6 world units = 0.2 task units, so the
    # scale is 0.03 and the wheelbase is about 0.097 task units (about 2/3 of the body).
    WHEELBASE = 0.097
    # Width of the soft tile selection around the look-ahead distance: about one tile.
    LOOKAHEAD_SOFTNESS = 0.105
    # Guard against dividing by a zero look-ahead distance (squared track units).
    DIST_EPS = 1e-4
    # Lowest target speed the schedule may ask for (normalised speed): crawling pace in
    # a hairpin, so the controller never asks to stop on track.
    SPEED_FLOOR = 0.15
    # Keep the brake mean under the 0.9 wheel-lock threshold so the car can still steer.
    BRAKE_CEILING = 0.85

    def __init__(self):
        super().__init__()
        # ---------------- steering ----------------
        # Look-ahead distance L = L0 + Lv * speed (track units). 0.25 ~ 2.4 tiles at
        # standstill, growing to ~6 tiles at top speed.
        self.lookahead_base = nn.Parameter(torch.tensor([0.25]))
        self.lookahead_per_speed = nn.Parameter(torch.tensor([0.35]))
        # steer action ~ -(front wheel angle in rad): CarRacing sets wheel target = -steer
        # (clipped to the 0.4 rad joint limit), so the gain on the pure-pursuit angle is ~1.
        self.steer_gain = nn.Parameter(torch.tensor([1.0]))
        # Yaw-rate damping: positive omega (turning left) -> steer right (positive).
        self.yaw_damping = nn.Parameter(torch.tensor([0.03]))

        # ---------------- speed schedule ----------------
        # Target speed on a straight (normalised speed, ~1 is top speed).
        self.straight_speed = nn.Parameter(torch.tensor([0.75]))
        # Target speed drop per radian of mean heading change over the tiles ahead.
        self.bend_slowdown = nn.Parameter(torch.tensor([0.6]))
        # Target speed drop per fraction of sharp-corner (curb) tiles ahead.
        self.curb_slowdown = nn.Parameter(torch.tensor([0.2]))

        # ---------------- longitudinal control ----------------
        # Gas per unit speed error: a 0.3 shortfall gives ~full gas.
        self.gas_gain = nn.Parameter(torch.tensor([3.0]))
        # Gas cut per unit rear-wheel slip (rear ABS reading above car speed).
        self.slip_gas_cut = nn.Parameter(torch.tensor([2.0]))
        # Brake per unit over-speed beyond the margin.
        self.brake_gain = nn.Parameter(torch.tensor([2.0]))
        # Tolerated over-speed before braking (normalised speed).
        self.brake_margin = nn.Parameter(torch.tensor([0.05]))

        # ---------------- exploration noise ----------------
        # log std per action: steer, gas, brake
        self.log_std_steer = nn.Parameter(torch.tensor([math.log(0.2)]))
        self.log_std_gas = nn.Parameter(torch.tensor([math.log(0.3)]))
        self.log_std_brake = nn.Parameter(torch.tensor([math.log(0.2)]))

    def forward(self, tiles, indicators):
        tiles = torch.nan_to_num(tiles, nan=0.0, posinf=10.0, neginf=-10.0)
        indicators = torch.nan_to_num(indicators, nan=0.0, posinf=10.0, neginf=-10.0)

        lat = tiles[:, :, 0]      # car lateral offset from tile centre, + = car left
        lon = tiles[:, :, 1]      # car longitudinal offset, negative while tile is ahead
        rel_head = tiles[:, :, 2]  # tile heading relative to car, + = road turns left
        curb = tiles[:, :, 3]     # 1 on sharp-corner tiles

        speed = indicators[:, 0]
        yaw_rate = indicators[:, 2]
        wheel_rl = indicators[:, 5]
        wheel_rr = indicators[:, 6]

        # ---- tile centres in the car frame (forward, left) ----
        # In the tile frame the centre sits at (forward=-lon, left=-lat) from the car;
        # rotating by the tile's relative heading gives car-frame coordinates.
        cos_h = torch.cos(rel_head)
        sin_h = torch.sin(rel_head)
        centre_fwd = -lon * cos_h + lat * sin_h
        centre_left = -lon * sin_h - lat * cos_h
        centre_dist = torch.sqrt(centre_fwd * centre_fwd + centre_left * centre_left + self.DIST_EPS)

        # ---- soft look-ahead point at distance L(speed) ----
        lookahead = self.lookahead_base + self.lookahead_per_speed * speed  # (B,)
        closeness = -((centre_dist - lookahead.unsqueeze(1)) ** 2) / (2.0 * self.LOOKAHEAD_SOFTNESS ** 2)
        tile_weight = torch.softmax(closeness, dim=1)
        aim_fwd = (tile_weight * centre_fwd).sum(dim=1)
        aim_left = (tile_weight * centre_left).sum(dim=1)
        aim_dist_sq = aim_fwd * aim_fwd + aim_left * aim_left + self.DIST_EPS

        # ---- pure pursuit: curvature of the arc through the aim point ----
        pursuit_curvature = 2.0 * aim_left / aim_dist_sq          # 1/track units, + = left
        wheel_angle = torch.atan(self.WHEELBASE * pursuit_curvature)  # rad, + = left
        steer_pursuit = -self.steer_gain * wheel_angle             # negative action steers left
        steer_damping = self.yaw_damping * yaw_rate
        steer = torch.clamp(steer_pursuit + steer_damping, -1.0, 1.0)

        # ---- speed schedule from the bend ahead ----
        # heading change of each tile relative to the nearest one, wrapped to [-pi, pi]
        turn = rel_head - rel_head[:, :1]
        turn_wrapped = torch.atan2(torch.sin(turn), torch.cos(turn))
        bend_ahead = torch.abs(turn_wrapped).mean(dim=1)          # rad
        curb_ahead = curb.mean(dim=1)                              # fraction of curb tiles
        target_speed = torch.clamp(
            self.straight_speed - self.bend_slowdown * bend_ahead - self.curb_slowdown * curb_ahead,
            min=self.SPEED_FLOOR,
        )
        speed_error = target_speed - speed                         # + = too slow

        # ---- traction control: rear wheels spinning faster than the car ----
        rear_slip = torch.clamp(0.5 * (wheel_rl + wheel_rr) - speed, min=0.0)

        gas_raw = self.gas_gain * speed_error - self.slip_gas_cut * rear_slip
        gas = torch.clamp(gas_raw, 0.0, 1.0)
        brake_raw = self.brake_gain * (-speed_error - self.brake_margin)
        brake = torch.clamp(brake_raw, 0.0, self.BRAKE_CEILING)

        action_mean = torch.stack([steer, gas, brake], dim=1)

        log_std = torch.cat([self.log_std_steer, self.log_std_gas, self.log_std_brake])
        std = torch.exp(log_std)
        scale_tril = torch.diag_embed(std.unsqueeze(0).expand(action_mean.shape[0], 3))

        info = {
            'weight_lookahead_base': self.lookahead_base,
            'weight_lookahead_per_speed': self.lookahead_per_speed,
            'weight_steer_gain': self.steer_gain,
            'weight_yaw_damping': self.yaw_damping,
            'weight_straight_speed': self.straight_speed,
            'weight_bend_slowdown': self.bend_slowdown,
            'weight_curb_slowdown': self.curb_slowdown,
            'weight_gas_gain': self.gas_gain,
            'weight_slip_gas_cut': self.slip_gas_cut,
            'weight_brake_gain': self.brake_gain,
            'weight_brake_margin': self.brake_margin,
            'weight_std_steer': torch.exp(self.log_std_steer),
            'weight_std_gas': torch.exp(self.log_std_gas),
            'weight_std_brake': torch.exp(self.log_std_brake),
            'latent_lateral_offset': lat[:, 0],
            'latent_heading_error': rel_head[:, 0],
            'latent_lookahead_dist': lookahead,
            'latent_aim_forward': aim_fwd,
            'latent_aim_left': aim_left,
            'latent_pursuit_curvature': pursuit_curvature,
            'latent_wheel_angle': wheel_angle,
            'latent_steer_pursuit': steer_pursuit,
            'latent_steer_damping': steer_damping,
            'latent_yaw_rate': yaw_rate,
            'latent_bend_ahead': bend_ahead,
            'latent_curb_ahead': curb_ahead,
            'latent_target_speed': target_speed,
            'latent_speed': speed,
            'latent_speed_error': speed_error,
            'latent_rear_slip': rear_slip,
            'latent_gas_raw': gas_raw,
            'latent_brake_raw': brake_raw,
        }
        return action_mean, scale_tril, info
