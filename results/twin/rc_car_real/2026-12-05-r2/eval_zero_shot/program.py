import math
import torch
import torch.nn as nn


class RacecarPolicy(nn.Module):
    # ---- fixed constants taken from the task description ----
    UNIT_M = 0.75              # 1 tile unit = 0.75 m (road 0.4 units = 0.3 m wide)
    SEG_SPACING_M = 0.08       # road segments are about 0.08 m apart
    WHEELBASE_M = 0.07         # 7 cm wheelbase
    STEER_MAX_RAD = 0.34       # steer = 1 corresponds to 0.34 rad of wheel angle
    SPEED_SCALE = 0.444        # speed indicator = speed in m/s * 0.444
    GAS_SPEED_MPS = 1.0        # gas - brake = 1 commands 1 m/s
    # segment windows (nearest first)
    NEAR_LO, NEAR_HI = 0, 2    # segments 0-1: where the car is now (~0-0.1 m ahead)
    FAR_LO, FAR_HI = 4, 8      # segments 4-7: curvature preview (~0.3-0.6 m ahead)
    KERB_LO, KERB_HI = 0, 8    # segments checked for kerbs (sharp bend coming)
    # distance between centres of the near window (index 0.5) and far window (index 5.5)
    PREVIEW_DIST_M = 5.0 * 0.08
    STD_FLOOR = 1e-3           # keeps the Cholesky diagonal strictly positive

    def __init__(self):
        super().__init__()
        # --- steering (steer fraction; negative = left) ---
        # lateral offset gain [steer fraction per tile unit]: pure-pursuit with ~0.3 m
        # lookahead gives ~0.35 steer for a 0.1-unit (7.5 cm) offset
        self.k_lat = nn.Parameter(torch.tensor([3.0]))
        # heading-error gain [steer fraction per rad]: pure pursuit 2L/Ld / 0.34 ~ 1.4
        self.k_head = nn.Parameter(torch.tensor([1.5]))
        # curvature feedforward gain [dimensionless]; 1 = exact kinematic bicycle L*kappa
        self.k_ff = nn.Parameter(torch.tensor([1.0]))
        # servo trim [steer fraction]: mechanical centre offset of a real RC car
        self.steer_trim = nn.Parameter(torch.tensor([0.0]))

        # --- speed schedule (m/s) ---
        # straight-road target speed, below the 1 m/s limit
        self.v_straight = nn.Parameter(torch.tensor([0.8]))
        # slow-down per unit of road curvature [m/s per rad/m]: kappa 2.5 (R=0.4 m) -> -0.25 m/s
        self.k_curv = nn.Parameter(torch.tensor([0.1]))
        # slow-down when the preview is fully kerbed (sharp bend) [m/s]
        self.k_kerb = nn.Parameter(torch.tensor([0.3]))
        # slow-down per tile unit of lateral offset [m/s per unit]: at the edge (0.2) -> -0.2 m/s
        self.k_off = nn.Parameter(torch.tensor([1.0]))

        # --- brake ---
        # brake per m/s of over-speed [brake fraction per m/s]
        self.k_brake = nn.Parameter(torch.tensor([0.5]))
        # dead zone: no braking until 0.1 m/s over target (0.5 * 0.1 = 0.05)
        self.brake_bias = nn.Parameter(torch.tensor([-0.05]))

        # --- exploration / demo noise: log standard deviations per action ---
        self.log_std_steer = nn.Parameter(torch.tensor([math.log(0.15)]))
        self.log_std_gas = nn.Parameter(torch.tensor([math.log(0.10)]))
        self.log_std_brake = nn.Parameter(torch.tensor([math.log(0.05)]))

    def forward(self, tiles, indicators):
        road_visible = torch.isfinite(tiles).flatten(1).all(dim=1).float()
        tiles = torch.nan_to_num(tiles, nan=0.0, posinf=0.0, neginf=0.0)
        indicators = torch.nan_to_num(indicators, nan=0.0, posinf=0.0, neginf=0.0)

        seg_x = tiles[:, :, 0]        # lateral offset of car from each segment centre line (units)
        seg_theta = tiles[:, :, 2]    # segment heading relative to car (rad, + = road turns left)
        seg_border = tiles[:, :, 3]   # 1 where the segment is a kerbed sharp bend

        # --- road geometry features ---
        x_near = seg_x[:, self.NEAR_LO:self.NEAR_HI].mean(dim=1)
        theta_near = seg_theta[:, self.NEAR_LO:self.NEAR_HI].mean(dim=1)
        theta_far = seg_theta[:, self.FAR_LO:self.FAR_HI].mean(dim=1)
        # road curvature ahead [rad/m], + = left bend
        curvature = (theta_far - theta_near) / self.PREVIEW_DIST_M
        kerb_ahead = seg_border[:, self.KERB_LO:self.KERB_HI].mean(dim=1)

        # --- vehicle state ---
        speed_mps = indicators[:, 0] / self.SPEED_SCALE
        heading = indicators[:, 1]
        yaw_rate = indicators[:, 2]
        motor_mps = indicators[:, 3] / self.SPEED_SCALE
        wheel_slip = motor_mps - speed_mps

        # --- steering ---
        steer_lat = self.k_lat * x_near                       # left of centre -> steer right (+)
        steer_head = -self.k_head * theta_near                # road points left -> steer left (-)
        steer_ff = -self.k_ff * self.WHEELBASE_M * curvature / self.STEER_MAX_RAD
        steer_raw = steer_lat + steer_head + steer_ff + self.steer_trim
        steer = torch.clamp(steer_raw, -1.0, 1.0)

        # --- speed schedule ---
        v_target = (self.v_straight
                    - self.k_curv * torch.abs(curvature)
                    - self.k_kerb * kerb_ahead
                    - self.k_off * torch.abs(x_near))
        speed_error = v_target - speed_mps
        gas = torch.clamp(v_target / self.GAS_SPEED_MPS, 0.0, 1.0)
        brake = torch.clamp(self.k_brake * (speed_mps - v_target) + self.brake_bias, 0.0, 1.0)

        action_mean = torch.stack([steer, gas, brake], dim=1)

        # --- noise model: diagonal Cholesky factor ---
        ones = torch.ones_like(speed_mps)
        std_steer = torch.exp(self.log_std_steer) * ones + self.STD_FLOOR
        std_gas = torch.exp(self.log_std_gas) * ones + self.STD_FLOOR
        std_brake = torch.exp(self.log_std_brake) * ones + self.STD_FLOOR
        scale_tril = torch.diag_embed(torch.stack([std_steer, std_gas, std_brake], dim=1))

        # kinematic yaw rate the commanded steering should produce (CCW +, steer<0 = left)
        pred_yaw_rate = -speed_mps * torch.tan(self.STEER_MAX_RAD * steer) / self.WHEELBASE_M

        info = {
            'weight_k_lat': self.k_lat,
            'weight_k_head': self.k_head,
            'weight_k_ff': self.k_ff,
            'weight_steer_trim': self.steer_trim,
            'weight_v_straight': self.v_straight,
            'weight_k_curv': self.k_curv,
            'weight_k_kerb': self.k_kerb,
            'weight_k_off': self.k_off,
            'weight_k_brake': self.k_brake,
            'weight_brake_bias': self.brake_bias,
            'weight_std_steer': torch.exp(self.log_std_steer),
            'weight_std_gas': torch.exp(self.log_std_gas),
            'weight_std_brake': torch.exp(self.log_std_brake),
            'latent_road_visible': road_visible,
            'latent_x_near': x_near,
            'latent_theta_near': theta_near,
            'latent_theta_far': theta_far,
            'latent_curvature': curvature,
            'latent_kerb_ahead': kerb_ahead,
            'latent_speed_mps': speed_mps,
            'latent_heading': heading,
            'latent_yaw_rate': yaw_rate,
            'latent_pred_yaw_rate': pred_yaw_rate,
            'latent_wheel_slip': wheel_slip,
            'latent_steer_lat': steer_lat,
            'latent_steer_head': steer_head,
            'latent_steer_ff': steer_ff,
            'latent_steer_raw': steer_raw,
            'latent_v_target': v_target,
            'latent_speed_error': speed_error,
        }
        return action_mean, scale_tril, info
