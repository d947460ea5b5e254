import math
import torch
import torch.nn as nn


class RacecarPolicy(nn.Module):
    # ---- fixed constants (task description and measured in the first rollout) ----
    WHEELBASE_M = 0.07             # car wheelbase (task description)
    STEER_MAX_RAD = 0.34           # steering action 1.0 = 0.34 rad (task description)
    SPEED_READING_PER_MPS = 0.444  # odometry speed reading = m/s x 0.444 (task description)
    METRES_PER_UNIT = 0.75         # tile units: 1 unit = 0.75 m (task description)
    SEG0_DIST_M = 0.04             # segment 0 lies ~0.04 m ahead of the car (measured: 0.025-0.058 m)
    SEG_SPACING_M = 0.08           # along-road spacing of segments (task description; measured 0.078 near the car)
    NEAR_FIRST = 1                 # near road fit: segments 1..4 (~0.12-0.36 m); segment 0 theta is noisy
    NEAR_LAST = 4
    FAR_FIRST = 4                  # far road fit: segments 4..9 (~0.36-0.76 m): the bend to come
    FAR_LAST = 9
    LINE_MAX_UNITS = 0.1           # racing-line offset limit: half the road half-width (0.2 units) keeps the car on the road
    MIN_GAS = 0.15                 # m/s floor on the speed command: a stopped car can never finish the lap
    MIN_STD = 1e-3                 # floor on standard deviations so scale_tril stays positive definite

    def __init__(self):
        super().__init__()
        # ---------------- steering (fraction of 0.34 rad, positive = right) ----------------
        # curvature feed-forward gain: 1.0 = steer exactly the kinematic angle atan(L*kappa) of the road
        self.k_ff = nn.Parameter(torch.tensor(1.0))
        # heading-error feedback, steer per rad of road heading relative to the car (damping ~0.7 with k_lateral=2)
        self.k_heading = nn.Parameter(torch.tensor(1.0))
        # lateral feedback, steer per unit of offset from the line (0.1 unit off-line -> 0.2 steer back)
        self.k_lateral = nn.Parameter(torch.tensor(2.0))
        # racing-line shift to the outside per 1/m of curvature ahead (kappa 6 /m -> 0.06 units ~ 4.5 cm outside)
        self.k_line = nn.Parameter(torch.tensor(0.01))
        # steering trim (servo centre offset)
        self.steer_trim = nn.Parameter(torch.tensor(0.0))

        # ---------------- speed command (m/s) ----------------
        self.v_straight = nn.Parameter(torch.tensor(0.6))       # straight-road speed (demo ~0.55-0.65 m/s)
        self.k_curve_slow = nn.Parameter(torch.tensor(0.04))    # m/s slower per 1/m of curvature ahead (kappa 8 -> -0.32)
        self.k_kerb_slow = nn.Parameter(torch.tensor(0.2))      # m/s slower per fraction of kerbed segments in view

        # ---------------- brake (subtracts from commanded speed) ----------------
        self.k_brake_overspeed = nn.Parameter(torch.tensor(0.3))  # brake per m/s above target speed
        self.brake_bias = nn.Parameter(torch.tensor(-0.1))        # negative: brake released at target speed

        # ---------------- noise (log standard deviations) ----------------
        self.log_std_steer = nn.Parameter(torch.tensor(math.log(0.10)))
        self.log_std_gas = nn.Parameter(torch.tensor(math.log(0.08)))
        self.log_std_brake = nn.Parameter(torch.tensor(math.log(0.08)))

    def _road_line_fit(self, seg_theta, first, last):
        # Least-squares line theta_j = heading_at_car + curvature * s_j over segments first..last,
        # with s_j the nominal distance of segment j along the road (m).
        # Returns (road heading relative to the car extrapolated to s = 0 [rad], road curvature [1/m]).
        dists = [self.SEG0_DIST_M + j * self.SEG_SPACING_M for j in range(first, last + 1)]
        mean_dist = sum(dists) / len(dists)
        devs = [d - mean_dist for d in dists]
        dev_sq = sum(e * e for e in devs)
        cols = [seg_theta[:, j] for j in range(first, last + 1)]
        theta_mean = torch.stack(cols, dim=1).mean(dim=1)
        curvature = torch.stack([c * (e / dev_sq) for c, e in zip(cols, devs)], dim=1).sum(dim=1)
        heading_at_car = theta_mean - curvature * mean_dist
        return heading_at_car, curvature

    def forward(self, tiles, indicators):
        tiles = torch.nan_to_num(tiles.float(), nan=0.0, posinf=0.0, neginf=0.0)
        indicators = torch.nan_to_num(indicators.float(), nan=0.0, posinf=0.0, neginf=0.0)
        batch = tiles.shape[0]

        seg_x = tiles[:, :, 0]        # car offset from each segment's centre line (units, + = car left)
        seg_theta = tiles[:, :, 2]    # road heading relative to car (rad, + = road turns left)
        seg_border = tiles[:, :, 3]   # 1 on kerbed sharp bends

        # ---- road geometry ----
        heading_error, curv_near = self._road_line_fit(seg_theta, self.NEAR_FIRST, self.NEAR_LAST)
        _, curv_far = self._road_line_fit(seg_theta, self.FAR_FIRST, self.FAR_LAST)
        x_near = seg_x[:, 0]                                   # lateral offset at the car (units)
        kerb_ahead = seg_border.mean(dim=1)                    # fraction of visible road that is kerbed
        curv_ahead = torch.maximum(torch.abs(curv_near), torch.abs(curv_far))  # sharpest curvature in view (1/m)

        speed_mps = indicators[:, 0] / self.SPEED_READING_PER_MPS
        motor_mps = indicators[:, 3] / self.SPEED_READING_PER_MPS
        wheel_slip = motor_mps - speed_mps
        yaw_rate = indicators[:, 2]

        # ---- steering: + = right ----
        # kinematic feed-forward: steering angle that makes the car's path curvature equal the road's
        ff_angle_rad = torch.atan(self.WHEELBASE_M * curv_near)          # CCW-positive angle
        steer_ff_term = -self.k_ff * ff_angle_rad / self.STEER_MAX_RAD   # left bend -> negative (left) steer
        # heading feedback: road heading left of the car -> steer left
        steer_heading_term = -self.k_heading * heading_error
        # lateral feedback around a racing line shifted to the outside of the bend ahead
        line_target = torch.clamp(-self.k_line * curv_far, -self.LINE_MAX_UNITS, self.LINE_MAX_UNITS)
        line_error = x_near - line_target                                # + = car left of its line
        steer_lateral_term = self.k_lateral * line_error                 # left of line -> steer right
        steer_raw = self.steer_trim + steer_ff_term + steer_heading_term + steer_lateral_term
        steer = torch.clamp(steer_raw, -1.0, 1.0)

        # ---- speed command ----
        curve_slowdown = self.k_curve_slow * curv_ahead
        kerb_slowdown = self.k_kerb_slow * kerb_ahead
        target_speed = self.v_straight - curve_slowdown - kerb_slowdown
        gas = torch.clamp(target_speed, self.MIN_GAS, 1.0)

        # ---- brake ----
        overspeed = speed_mps - target_speed
        brake_raw = self.brake_bias + self.k_brake_overspeed * overspeed
        brake = torch.clamp(brake_raw, 0.0, 1.0)

        action_mean = torch.stack([steer, gas, brake], dim=1)

        std_vec = torch.stack([
            torch.exp(self.log_std_steer),
            torch.exp(self.log_std_gas),
            torch.exp(self.log_std_brake),
        ]).clamp(min=self.MIN_STD)
        scale_tril = torch.diag_embed(std_vec.unsqueeze(0).expand(batch, 3))

        info = {
            'weight_k_ff': self.k_ff.reshape(1),
            'weight_k_heading': self.k_heading.reshape(1),
            'weight_k_lateral': self.k_lateral.reshape(1),
            'weight_k_line': self.k_line.reshape(1),
            'weight_steer_trim': self.steer_trim.reshape(1),
            'weight_v_straight': self.v_straight.reshape(1),
            'weight_k_curve_slow': self.k_curve_slow.reshape(1),
            'weight_k_kerb_slow': self.k_kerb_slow.reshape(1),
            'weight_k_brake_overspeed': self.k_brake_overspeed.reshape(1),
            'weight_brake_bias': self.brake_bias.reshape(1),
            'weight_std_steer': std_vec[0].reshape(1),
            'weight_std_gas': std_vec[1].reshape(1),
            'weight_std_brake': std_vec[2].reshape(1),
            # road geometry
            'latent_heading_error_rad': heading_error,
            'latent_curv_near_per_m': curv_near,
            'latent_curv_far_per_m': curv_far,
            'latent_curv_ahead_per_m': curv_ahead,
            'latent_kerb_ahead_frac': kerb_ahead,
            'latent_lateral_offset_units': x_near,
            'latent_line_target_units': line_target,
            'latent_line_error_units': line_error,
            # vehicle state
            'latent_speed_mps': speed_mps,
            'latent_motor_mps': motor_mps,
            'latent_wheel_slip_mps': wheel_slip,
            'latent_yaw_rate': yaw_rate,
            # steering decomposition
            'latent_ff_angle_rad': ff_angle_rad,
            'latent_steer_ff_term': steer_ff_term,
            'latent_steer_heading_term': steer_heading_term,
            'latent_steer_lateral_term': steer_lateral_term,
            'latent_steer_raw': steer_raw,
            # speed decomposition
            'latent_curve_slowdown': curve_slowdown,
            'latent_kerb_slowdown': kerb_slowdown,
            'latent_target_speed_mps': target_speed,
            'latent_overspeed_mps': overspeed,
            'latent_brake_raw': brake_raw,
        }
        return action_mean, scale_tril, info
