# refine-structure: car_racing
# refine-edit: car_corner_speed
# refine-edit: car_coast
# Origin: the zero-shot starter, written independently from the generation prompt alone (task
# description, contract and generation rules); its text below is kept as written.
"""Zero-shot starter for car_racing: a look-ahead steering law plus a speed planner.
Steer = lateral-offset correction + near heading error + look-ahead heading (tiles further
ahead) + yaw-rate damping.  A target speed is lowered by the curvature of the road ahead,
by the lateral offset and by wheel slip (ABS readings vs speed); gas and brake follow the
speed error.  Each action has a learnable log-std (diagonal Gaussian).
Revision (offline catalogue): the target speed is the lowest speed the visible bends allow,
each bend's limit raised by the braking distance still left before it, capped by a top speed.
Revision (offline catalogue): gas is cut in proportion to the steering magnitude.
"""
import math

import torch
import torch.nn as nn


class RacecarPolicy(nn.Module):
    # Inputs are clamped to this magnitude after nan_to_num so that inf cannot propagate
    # (track units, normalised speeds and rad/s all stay far below it in normal driving).
    INPUT_BOUND = 50.0
    # Tiles 0..2 describe the road under and just in front of the car (about 0-0.3 units):
    # used for the lateral offset and the near heading error.
    NEAR_TILES = 3
    # Tiles 3..6 lie 0.3-0.7 units ahead (2-5 car lengths): look-ahead heading for steering.
    LOOK_START = 3
    LOOK_END = 7
    # Tiles 6..11 lie 0.6-1.2 units ahead: their turn relative to the nearest tile is the
    # curvature the car must slow down for before it reaches the bend.
    CURVE_START = 6
    # Lowest target speed (normalised) so the car never plans to stand still.
    MIN_TARGET_SPEED = 0.05
    # Centreline spacing of the tiles in track units.
    TILE_LENGTH = 0.105
    # Tiles over which the turn of the road is measured for one bend's curvature.
    CURVE_SPAN = 4
    # Bends examined: one starting at each of tiles 0-7, whose spans end by tile 11.
    N_BENDS = 8
    # Curvature floor (1/track unit): a straight allows a finite, very high corner speed.
    CURVATURE_FLOOR = 1e-3
    # Keeps the square root of the allowed speed differentiable at zero.
    SPEED_EPS = 1e-6

    def __init__(self):
        super().__init__()
        # --- steering (steer > 0 is right, theta > 0 means the road turns left) ---
        # Offset x > 0 means the car is left of centre -> steer right (+). The half-width
        # is 0.2, so a gain of 4 gives about 0.8 steer at the track edge.
        self.k_offset = nn.Parameter(torch.tensor([4.0]))
        # Near heading error theta > 0 (road points left of the car) -> steer left (-).
        # About full steer for a 40 degree misalignment.
        self.k_heading_near = nn.Parameter(torch.tensor([-1.5]))
        # Look-ahead heading: start turning into a bend before the car reaches it (-).
        self.k_heading_ahead = nn.Parameter(torch.tensor([-1.0]))
        # Yaw rate > 0 (turning left) -> steer right (+) to damp the rotation; yaw rates
        # are a few rad/s in a bend, so 0.1 per rad/s is a mild damping term.
        self.k_yaw_damping = nn.Parameter(torch.tensor([0.1]))

        # --- speed planner (normalised speed, 1 ~ top speed) ---
        # Usable lateral grip: a bend of curvature c allows speed^2 = grip / c (about 0.8 in
        # normalised speed^2 per 1/track unit).
        self.grip = nn.Parameter(torch.tensor([0.8]))
        # Usable braking: each track unit before a bend adds 2 * decel to the allowed speed^2.
        self.decel = nn.Parameter(torch.tensor([0.1]))
        # Speed on a long straight.
        self.top_speed = nn.Parameter(torch.tensor([1.0]))

        # --- longitudinal control from the speed error (target - speed) ---
        # Gas gain: a deficit of 0.3 gives about full throttle.
        self.k_gas = nn.Parameter(torch.tensor([3.0]))
        # Small throttle at zero error to hold speed against drag and rolling resistance.
        self.gas_hold = nn.Parameter(torch.tensor([0.1]))
        # Brake gain on the excess speed (target - speed < 0): 0.5 excess -> ~0.65 brake,
        # staying below the 0.9 lock threshold for moderate excesses.
        self.k_brake = nn.Parameter(torch.tensor([1.5]))
        # Brake dead-band: no brake until the car is about 0.07 above the target speed.
        self.brake_bias = nn.Parameter(torch.tensor([-0.1]))
        # Gas cut per unit of steering magnitude: rear-wheel drive spins out under gas in a
        # bend, so full steer takes the gas away.
        self.k_steer_coast = nn.Parameter(torch.tensor([1.0]))

        # --- exploration / demonstration noise: log std per action (steer, gas, brake) ---
        self.log_std = nn.Parameter(torch.tensor([math.log(0.3), math.log(0.3), math.log(0.2)]))

    @staticmethod
    def _wrap_angle(angle):
        # Wrap an angle difference back into [-pi, pi] (smooth and differentiable).
        return torch.atan2(torch.sin(angle), torch.cos(angle))

    def forward(self, tiles, indicators):
        tiles = torch.clamp(torch.nan_to_num(tiles, nan=0.0), -self.INPUT_BOUND, self.INPUT_BOUND)
        indicators = torch.clamp(torch.nan_to_num(indicators, nan=0.0), -self.INPUT_BOUND, self.INPUT_BOUND)

        tile_x = tiles[:, :, 0]       # lateral offset of the car in each tile frame (+ = left)
        tile_theta = tiles[:, :, 2]   # tile heading relative to the car (+ = road turns left)
        tile_y = tiles[:, :, 1]       # longitudinal position of the car in each tile frame

        speed = indicators[:, 0]
        yaw_rate = indicators[:, 2]
        wheel_fl = indicators[:, 3]
        wheel_fr = indicators[:, 4]
        wheel_rl = indicators[:, 5]
        wheel_rr = indicators[:, 6]

        # --- geometry ---
        lateral_offset = tile_x[:, : self.NEAR_TILES].mean(dim=1)
        heading_near = tile_theta[:, : self.NEAR_TILES].mean(dim=1)
        heading_ahead = tile_theta[:, self.LOOK_START : self.LOOK_END].mean(dim=1)

        # --- steering ---
        steer_offset_term = self.k_offset * lateral_offset
        steer_near_term = self.k_heading_near * heading_near
        steer_ahead_term = self.k_heading_ahead * heading_ahead
        steer_damping_term = self.k_yaw_damping * yaw_rate
        steer_raw = steer_offset_term + steer_near_term + steer_ahead_term + steer_damping_term
        steer = torch.clamp(steer_raw, -1.0, 1.0)

        # --- wheel slip from the ABS sensors ---
        # Rear (driven) wheels spinning faster than the car: too much gas.
        rear_spin = torch.relu(0.5 * (wheel_rl + wheel_rr) - speed)
        # Front wheels turning slower than the car: locking under braking / sliding.
        front_lock = torch.relu(speed - 0.5 * (wheel_fl + wheel_fr))
        wheel_slip = rear_spin + front_lock

        # --- target speed and speed error ---
        # Curvature of the bend starting at each visible tile (1/track unit): the road's total
        # turning over the span, counted in absolute value so an S-bend is not a straight.
        tile_turn = torch.abs(self._wrap_angle(tile_theta[:, 1:] - tile_theta[:, :-1]))
        bend_turn = torch.stack(
            [tile_turn[:, k : k + self.CURVE_SPAN].sum(dim=1) for k in range(self.N_BENDS)], dim=1
        )
        bend_curvature = bend_turn / (self.CURVE_SPAN * self.TILE_LENGTH) + self.CURVATURE_FLOOR
        # Distance still left before each bend (the tile centre is ahead while y < 0).
        bend_distance = torch.relu(-tile_y[:, : -self.CURVE_SPAN])
        allowed_speed = torch.sqrt(
            torch.relu(self.grip) / bend_curvature
            + 2.0 * torch.relu(self.decel) * bend_distance
            + self.SPEED_EPS
        )
        corner_limit = torch.min(allowed_speed, dim=1).values
        target_speed_raw = torch.minimum(corner_limit, self.top_speed)
        target_speed = torch.clamp(target_speed_raw, min=self.MIN_TARGET_SPEED)
        speed_error = target_speed - speed

        # --- gas and brake ---
        gas_raw = self.gas_hold + self.k_gas * speed_error
        gas_raw = gas_raw - self.k_steer_coast * torch.abs(steer)
        gas = torch.clamp(gas_raw, 0.0, 1.0)
        brake_raw = self.brake_bias - self.k_brake * speed_error
        brake = torch.clamp(brake_raw, 0.0, 1.0)

        action_mean = torch.stack([steer, gas, brake], dim=1)

        std = torch.exp(self.log_std)
        std_batch = std.unsqueeze(0) * torch.ones_like(speed).unsqueeze(1)
        scale_tril = torch.diag_embed(std_batch)

        info = {
            "weight_k_offset": self.k_offset,
            "weight_k_heading_near": self.k_heading_near,
            "weight_k_heading_ahead": self.k_heading_ahead,
            "weight_k_yaw_damping": self.k_yaw_damping,
            "weight_grip": self.grip,
            "weight_decel": self.decel,
            "weight_top_speed": self.top_speed,
            "weight_k_gas": self.k_gas,
            "weight_gas_hold": self.gas_hold,
            "weight_k_brake": self.k_brake,
            "weight_brake_bias": self.brake_bias,
            "weight_k_steer_coast": self.k_steer_coast,
            "weight_log_std_steer": self.log_std[0:1],
            "weight_log_std_gas": self.log_std[1:2],
            "weight_log_std_brake": self.log_std[2:3],
            "latent_lateral_offset": lateral_offset,
            "latent_heading_near": heading_near,
            "latent_heading_ahead": heading_ahead,
            "latent_yaw_rate": yaw_rate,
            "latent_steer_offset_term": steer_offset_term,
            "latent_steer_near_term": steer_near_term,
            "latent_steer_ahead_term": steer_ahead_term,
            "latent_steer_damping_term": steer_damping_term,
            "latent_steer_raw": steer_raw,
            "latent_speed": speed,
            "latent_rear_spin": rear_spin,
            "latent_front_lock": front_lock,
            "latent_wheel_slip": wheel_slip,
            "latent_corner_limit": corner_limit,
            "latent_target_speed": target_speed,
            "latent_speed_error": speed_error,
            "latent_gas_raw": gas_raw,
            "latent_brake_raw": brake_raw,
        }
        return action_mean, scale_tril, info
