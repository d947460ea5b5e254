import math
import torch
import torch.nn as nn


class RacecarPolicy(nn.Module):
    # ---- fixed constants taken from the task description ----
    STEER_MAX_RAD = 0.34        # steering action 1.0 corresponds to 0.34 rad (used only for the logged angle)
    SPEED_READING_PER_MPS = 0.444  # odometry speed reading = m/s x 0.444
    METRES_PER_UNIT = 0.75      # tile units: 1 unit = 0.75 m (road half-width 0.2 units = 0.15 m)
    NEAR_END = 3                # segments 0..2 (~0-0.16 m ahead at 0.08 m spacing): road at the car now
    FAR_START = 4               # segments 4..8 (~0.32-0.64 m ahead, ~0.3-0.6 s at 1 m/s): upcoming bend
    FAR_END = 9
    CURVE_START = 3             # segments 3..11: visible road ahead used to choose the speed
    MIN_GAS = 0.15              # m/s floor on the speed command: a stopped car can never finish the lap
    MIN_STD = 1e-3              # floor on the standard deviations so scale_tril stays positive definite

    def __init__(self):
        super().__init__()
        # ---------------- steering (fraction of 0.34 rad, positive = right) ----------------
        # lateral offset gain, per tile unit: at the road edge (x = 0.2) it asks for 0.6 steer toward the centre
        self.k_lateral = nn.Parameter(torch.tensor(3.0))
        # near heading-error gain, per rad: aligns the car with the road (kinematic loop damping ~0.7)
        self.k_heading = nn.Parameter(torch.tensor(1.0))
        # preview (curvature feed-forward) gain, per rad of road heading 0.3-0.65 m ahead;
        # steady bend needs steer ~ (L/R)/0.34 = 0.21/R and theta_far ~ 0.5/R, so ~0.3 with the near term
        self.k_preview = nn.Parameter(torch.tensor(0.3))
        # steering trim (servo centre offset), steer fraction
        self.steer_trim = nn.Parameter(torch.tensor(0.0))

        # ---------------- speed command (m/s) ----------------
        # speed on straight road, m/s (limit is 1 m/s)
        self.v_straight = nn.Parameter(torch.tensor(0.7))
        # slow-down per rad of mean absolute road heading ahead (a tight bend ahead gives ~1 rad)
        self.k_curve_slow = nn.Parameter(torch.tensor(0.25))
        # slow-down when the visible road is kerbed (sharp bend), m/s per fraction of kerbed segments
        self.k_kerb_slow = nn.Parameter(torch.tensor(0.15))

        # ---------------- brake (subtracts from commanded speed) ----------------
        # brake when faster than the target speed, per m/s of overspeed
        self.k_brake_overspeed = nn.Parameter(torch.tensor(0.5))
        # brake offset (0: released when at target speed)
        self.brake_bias = nn.Parameter(torch.tensor(0.0))

        # ---------------- exploration / demonstration noise (log standard deviations) ----------------
        self.log_std_steer = nn.Parameter(torch.tensor(math.log(0.10)))   # ~0.1 of full steer
        self.log_std_gas = nn.Parameter(torch.tensor(math.log(0.05)))     # ~0.05 m/s
        self.log_std_brake = nn.Parameter(torch.tensor(math.log(0.05)))   # ~0.05 m/s

    def forward(self, tiles, indicators):
        tiles = torch.nan_to_num(tiles.float(), nan=0.0, posinf=0.0, neginf=0.0)
        indicators = torch.nan_to_num(indicators.float(), nan=0.0, posinf=0.0, neginf=0.0)
        batch = tiles.shape[0]

        seg_x = tiles[:, :, 0]        # lateral offset of car from each segment centre (units, + = car left)
        seg_theta = tiles[:, :, 2]    # road heading relative to car (rad, + = road turns left)
        seg_border = tiles[:, :, 3]   # 1 on kerbed sharp bends

        # ---- features ----
        x_near = seg_x[:, 0]                                              # lateral offset now (units)
        theta_near = seg_theta[:, :self.NEAR_END].mean(dim=1)             # heading error (rad)
        theta_far = seg_theta[:, self.FAR_START:self.FAR_END].mean(dim=1) # heading of the road ahead (rad)
        curve_ahead = torch.abs(seg_theta[:, self.CURVE_START:]).mean(dim=1)  # how much the road bends ahead (rad)
        kerb_ahead = seg_border.mean(dim=1)                               # fraction of visible road that is kerbed

        speed_mps = indicators[:, 0] / self.SPEED_READING_PER_MPS         # measured speed (m/s)
        motor_mps = indicators[:, 3] / self.SPEED_READING_PER_MPS         # motor speed on the same scale (m/s)
        wheel_slip = motor_mps - speed_mps                                # > 0 when rear wheels spin
        yaw_rate = indicators[:, 2]                                       # rad/s, CCW positive

        # ---- steering: + = right ----
        steer_lateral_term = self.k_lateral * x_near          # car left of centre -> steer right
        steer_heading_term = -self.k_heading * theta_near     # road turns left -> steer left
        steer_preview_term = -self.k_preview * theta_far      # bend ahead -> start turning into it
        steer_raw = self.steer_trim + steer_lateral_term + steer_heading_term + steer_preview_term
        steer = torch.clamp(steer_raw, -1.0, 1.0)

        # ---- speed command ----
        curve_slowdown = self.k_curve_slow * curve_ahead
        kerb_slowdown = self.k_kerb_slow * kerb_ahead
        target_speed = self.v_straight - curve_slowdown - kerb_slowdown   # m/s
        gas = torch.clamp(target_speed, self.MIN_GAS, 1.0)

        # ---- brake: only when arriving faster than the target ----
        overspeed = speed_mps - target_speed
        brake_raw = self.brake_bias + self.k_brake_overspeed * overspeed
        brake = torch.clamp(brake_raw, 0.0, 1.0)

        action_mean = torch.stack([steer, gas, brake], dim=1)

        # ---- diagonal covariance ----
        std_vec = torch.stack([
            torch.exp(self.log_std_steer),
            torch.exp(self.log_std_gas),
            torch.exp(self.log_std_brake),
        ]).clamp(min=self.MIN_STD)
        scale_tril = torch.diag_embed(std_vec.unsqueeze(0).expand(batch, 3))

        info = {
            # coefficients
            'weight_k_lateral': self.k_lateral.reshape(1),
            'weight_k_heading': self.k_heading.reshape(1),
            'weight_k_preview': self.k_preview.reshape(1),
            'weight_steer_trim': self.steer_trim.reshape(1),
            'weight_v_straight': self.v_straight.reshape(1),
            'weight_k_curve_slow': self.k_curve_slow.reshape(1),
            'weight_k_kerb_slow': self.k_kerb_slow.reshape(1),
            'weight_k_brake_overspeed': self.k_brake_overspeed.reshape(1),
            'weight_brake_bias': self.brake_bias.reshape(1),
            'weight_std_steer': std_vec[0].reshape(1),
            'weight_std_gas': std_vec[1].reshape(1),
            'weight_std_brake': std_vec[2].reshape(1),
            # features
            'latent_lateral_offset_units': x_near,
            'latent_lateral_offset_m': x_near * self.METRES_PER_UNIT,
            'latent_heading_error_near_rad': theta_near,
            'latent_road_heading_far_rad': theta_far,
            'latent_curve_ahead_rad': curve_ahead,
            'latent_kerb_ahead_frac': kerb_ahead,
            'latent_speed_mps': speed_mps,
            'latent_motor_mps': motor_mps,
            'latent_wheel_slip_mps': wheel_slip,
            'latent_yaw_rate': yaw_rate,
            # steering decomposition
            'latent_steer_lateral_term': steer_lateral_term,
            'latent_steer_heading_term': steer_heading_term,
            'latent_steer_preview_term': steer_preview_term,
            'latent_steer_raw': steer_raw,
            'latent_steer_angle_rad_ccw': -steer * self.STEER_MAX_RAD,
            # speed decomposition
            'latent_curve_slowdown': curve_slowdown,
            'latent_kerb_slowdown': kerb_slowdown,
            'latent_target_speed_mps': target_speed,
            'latent_overspeed_mps': overspeed,
            'latent_brake_raw': brake_raw,
        }
        return action_mean, scale_tril, info
