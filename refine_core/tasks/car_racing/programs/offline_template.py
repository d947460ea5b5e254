# refine-structure: car_racing
# Origin: the zero-shot starter, written independently from the generation prompt alone (task
# description, contract and generation rules); its text below is kept as written.
"""Zero-shot starter for car_racing: a look-ahead steering law plus a speed planner.
Steer = lateral-offset correction + near heading error + look-ahead heading (tiles further
ahead) + yaw-rate damping.  A target speed is lowered by the curvature of the road ahead,
by the lateral offset and by wheel slip (ABS readings vs speed); gas and brake follow the
speed error.  Each action has a learnable log-std (diagonal Gaussian).
# >>> car_pursuit
Revision (offline catalogue): steering aims at a point on the centre line a speed-dependent
number of tiles ahead (pure pursuit) instead of summing offset and heading terms.
# <<< car_pursuit
# >>> car_corner_speed
Revision (offline catalogue): the target speed is the lowest speed the visible bends allow,
each bend's limit raised by the braking distance still left before it, capped by a top speed.
# <<< car_corner_speed
# >>> car_coast
Revision (offline catalogue): gas is cut in proportion to the steering magnitude.
# <<< car_coast
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
    # >>> car_pursuit
    # Number of tiles in the observation; the aim point slides along them.
    N_TILES = 12
    # Front-to-rear axle distance in track units (about 3.2 world units x 0.03 units each).
    WHEELBASE = 0.097
    # Keeps the aim distance's square root differentiable when the aim point is the car.
    DIST_EPS = 1e-6
    # <<< car_pursuit
    # >>> car_corner_speed
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
    # <<< car_corner_speed

    def __init__(self):
        super().__init__()
        # --- steering (steer > 0 is right, theta > 0 means the road turns left) ---
        # >>> not car_pursuit
        # Offset x > 0 means the car is left of centre -> steer right (+). The half-width
        # is 0.2, so a gain of 4 gives about 0.8 steer at the track edge.
        self.k_offset = nn.Parameter(torch.tensor([4.0]))
        # Near heading error theta > 0 (road points left of the car) -> steer left (-).
        # About full steer for a 40 degree misalignment.
        self.k_heading_near = nn.Parameter(torch.tensor([-1.5]))
        # Look-ahead heading: start turning into a bend before the car reaches it (-).
        self.k_heading_ahead = nn.Parameter(torch.tensor([-1.0]))
        # <<< not car_pursuit
        # >>> car_pursuit
        # Pure pursuit: steer = -k * (wheel angle of the arc through the aim point); an aim
        # point to the left (positive bearing) needs left (negative) steer.
        self.k_pursuit = nn.Parameter(torch.tensor([2.0]))
        # Aim point, in tiles ahead of the nearest one: further ahead at higher speed.
        self.look_base = nn.Parameter(torch.tensor([3.0]))
        self.look_per_speed = nn.Parameter(torch.tensor([4.0]))
        # <<< car_pursuit
        # Yaw rate > 0 (turning left) -> steer right (+) to damp the rotation; yaw rates
        # are a few rad/s in a bend, so 0.1 per rad/s is a mild damping term.
        self.k_yaw_damping = nn.Parameter(torch.tensor([0.1]))

        # --- speed planner (normalised speed, 1 ~ top speed) ---
        # >>> not car_corner_speed
        # Cruise speed on a straight, centred, non-slipping car.
        self.cruise_speed = nn.Parameter(torch.tensor([0.7]))
        # Slow-down per radian of road turn ahead: a 90 degree corner (~1.5 rad) cuts
        # the target by about 0.6.
        self.k_curvature_slowdown = nn.Parameter(torch.tensor([0.4]))
        # Slow-down per track unit of lateral offset: 0.2 at the edge -> -0.2.
        self.k_offset_slowdown = nn.Parameter(torch.tensor([1.0]))
        # Slow-down per unit of wheel slip (rear spin + front lock, same scale as speed).
        self.k_slip_slowdown = nn.Parameter(torch.tensor([1.0]))
        # <<< not car_corner_speed
        # >>> car_corner_speed
        # Usable lateral grip: a bend of curvature c allows speed^2 = grip / c (about 0.8 in
        # normalised speed^2 per 1/track unit).
        self.grip = nn.Parameter(torch.tensor([0.8]))
        # Usable braking: each track unit before a bend adds 2 * decel to the allowed speed^2.
        self.decel = nn.Parameter(torch.tensor([0.1]))
        # Speed on a long straight.
        self.top_speed = nn.Parameter(torch.tensor([1.0]))
        # <<< car_corner_speed

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
        # >>> car_coast
        # Gas cut per unit of steering magnitude: rear-wheel drive spins out under gas in a
        # bend, so full steer takes the gas away.
        self.k_steer_coast = nn.Parameter(torch.tensor([1.0]))
        # <<< car_coast

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
        # >>> car_pursuit|car_corner_speed
        tile_y = tiles[:, :, 1]       # longitudinal position of the car in each tile frame
        # <<< car_pursuit|car_corner_speed

        speed = indicators[:, 0]
        yaw_rate = indicators[:, 2]
        wheel_fl = indicators[:, 3]
        wheel_fr = indicators[:, 4]
        wheel_rl = indicators[:, 5]
        wheel_rr = indicators[:, 6]

        # --- geometry ---
        lateral_offset = tile_x[:, : self.NEAR_TILES].mean(dim=1)
        # >>> not car_pursuit
        heading_near = tile_theta[:, : self.NEAR_TILES].mean(dim=1)
        heading_ahead = tile_theta[:, self.LOOK_START : self.LOOK_END].mean(dim=1)
        # <<< not car_pursuit
        # >>> not car_corner_speed
        # How much the road turns between the nearest tile and the far tiles (rad),
        # independent of how the car itself is pointed.
        turn_ahead = self._wrap_angle(tile_theta[:, self.CURVE_START :] - tile_theta[:, 0:1])
        curvature_ahead = torch.abs(turn_ahead).mean(dim=1)
        # <<< not car_corner_speed

        # --- steering ---
        # >>> not car_pursuit
        steer_offset_term = self.k_offset * lateral_offset
        steer_near_term = self.k_heading_near * heading_near
        steer_ahead_term = self.k_heading_ahead * heading_ahead
        # <<< not car_pursuit
        # >>> car_pursuit
        # Each tile centre in the car frame (forward, left): the car sits at (y, x) in the tile
        # frame, and the tile frame is turned by theta from the car's heading.
        centre_fwd = tile_x * torch.sin(tile_theta) - tile_y * torch.cos(tile_theta)
        centre_left = -tile_y * torch.sin(tile_theta) - tile_x * torch.cos(tile_theta)
        # The aim point slides smoothly between tile centres (linear interpolation weights).
        look_tiles = torch.clamp(self.look_base + self.look_per_speed * speed, 0.0, self.N_TILES - 1.0)
        tile_index = torch.arange(self.N_TILES, dtype=tiles.dtype, device=tiles.device)
        aim_weights = torch.relu(1.0 - torch.abs(tile_index.unsqueeze(0) - look_tiles.unsqueeze(1)))
        aim_fwd = (aim_weights * centre_fwd).sum(dim=1)
        aim_left = (aim_weights * centre_left).sum(dim=1)
        aim_bearing = torch.atan2(aim_left, aim_fwd)
        aim_distance = torch.sqrt(aim_fwd * aim_fwd + aim_left * aim_left + self.DIST_EPS)
        # Wheel angle of the circular arc from the rear axle through the aim point.
        pursuit_angle = torch.atan2(2.0 * self.WHEELBASE * torch.sin(aim_bearing), aim_distance)
        steer_pursuit_term = -self.k_pursuit * pursuit_angle
        # <<< car_pursuit
        steer_damping_term = self.k_yaw_damping * yaw_rate
        # >>> not car_pursuit
        steer_raw = steer_offset_term + steer_near_term + steer_ahead_term + steer_damping_term
        # <<< not car_pursuit
        # >>> car_pursuit
        steer_raw = steer_pursuit_term + steer_damping_term
        # <<< car_pursuit
        steer = torch.clamp(steer_raw, -1.0, 1.0)

        # --- wheel slip from the ABS sensors ---
        # Rear (driven) wheels spinning faster than the car: too much gas.
        rear_spin = torch.relu(0.5 * (wheel_rl + wheel_rr) - speed)
        # Front wheels turning slower than the car: locking under braking / sliding.
        front_lock = torch.relu(speed - 0.5 * (wheel_fl + wheel_fr))
        wheel_slip = rear_spin + front_lock

        # --- target speed and speed error ---
        # >>> not car_corner_speed
        target_speed_raw = (
            self.cruise_speed
            - self.k_curvature_slowdown * curvature_ahead
            - self.k_offset_slowdown * torch.abs(lateral_offset)
            - self.k_slip_slowdown * wheel_slip
        )
        # <<< not car_corner_speed
        # >>> car_corner_speed
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
        # <<< car_corner_speed
        target_speed = torch.clamp(target_speed_raw, min=self.MIN_TARGET_SPEED)
        speed_error = target_speed - speed

        # --- gas and brake ---
        gas_raw = self.gas_hold + self.k_gas * speed_error
        # >>> car_coast
        gas_raw = gas_raw - self.k_steer_coast * torch.abs(steer)
        # <<< car_coast
        gas = torch.clamp(gas_raw, 0.0, 1.0)
        brake_raw = self.brake_bias - self.k_brake * speed_error
        brake = torch.clamp(brake_raw, 0.0, 1.0)

        action_mean = torch.stack([steer, gas, brake], dim=1)

        std = torch.exp(self.log_std)
        std_batch = std.unsqueeze(0) * torch.ones_like(speed).unsqueeze(1)
        scale_tril = torch.diag_embed(std_batch)

        info = {
            # >>> not car_pursuit
            "weight_k_offset": self.k_offset,
            "weight_k_heading_near": self.k_heading_near,
            "weight_k_heading_ahead": self.k_heading_ahead,
            # <<< not car_pursuit
            # >>> car_pursuit
            "weight_k_pursuit": self.k_pursuit,
            "weight_look_base": self.look_base,
            "weight_look_per_speed": self.look_per_speed,
            # <<< car_pursuit
            "weight_k_yaw_damping": self.k_yaw_damping,
            # >>> not car_corner_speed
            "weight_cruise_speed": self.cruise_speed,
            "weight_k_curvature_slowdown": self.k_curvature_slowdown,
            "weight_k_offset_slowdown": self.k_offset_slowdown,
            "weight_k_slip_slowdown": self.k_slip_slowdown,
            # <<< not car_corner_speed
            # >>> car_corner_speed
            "weight_grip": self.grip,
            "weight_decel": self.decel,
            "weight_top_speed": self.top_speed,
            # <<< car_corner_speed
            "weight_k_gas": self.k_gas,
            "weight_gas_hold": self.gas_hold,
            "weight_k_brake": self.k_brake,
            "weight_brake_bias": self.brake_bias,
            # >>> car_coast
            "weight_k_steer_coast": self.k_steer_coast,
            # <<< car_coast
            "weight_log_std_steer": self.log_std[0:1],
            "weight_log_std_gas": self.log_std[1:2],
            "weight_log_std_brake": self.log_std[2:3],
            "latent_lateral_offset": lateral_offset,
            # >>> not car_pursuit
            "latent_heading_near": heading_near,
            "latent_heading_ahead": heading_ahead,
            # <<< not car_pursuit
            # >>> not car_corner_speed
            "latent_curvature_ahead": curvature_ahead,
            # <<< not car_corner_speed
            "latent_yaw_rate": yaw_rate,
            # >>> not car_pursuit
            "latent_steer_offset_term": steer_offset_term,
            "latent_steer_near_term": steer_near_term,
            "latent_steer_ahead_term": steer_ahead_term,
            # <<< not car_pursuit
            # >>> car_pursuit
            "latent_look_tiles": look_tiles,
            "latent_aim_bearing": aim_bearing,
            "latent_aim_distance": aim_distance,
            "latent_steer_pursuit_term": steer_pursuit_term,
            # <<< car_pursuit
            "latent_steer_damping_term": steer_damping_term,
            "latent_steer_raw": steer_raw,
            "latent_speed": speed,
            "latent_rear_spin": rear_spin,
            "latent_front_lock": front_lock,
            "latent_wheel_slip": wheel_slip,
            # >>> car_corner_speed
            "latent_corner_limit": corner_limit,
            # <<< car_corner_speed
            "latent_target_speed": target_speed,
            "latent_speed_error": speed_error,
            "latent_gas_raw": gas_raw,
            "latent_brake_raw": brake_raw,
        }
        return action_mean, scale_tril, info
