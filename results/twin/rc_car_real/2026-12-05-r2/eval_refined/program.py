import math
import torch
import torch.nn as nn


class RacecarPolicy(nn.Module):
    # ---- fixed constants from the task description / measured geometry ----
    UNIT_M = 0.75              # 1 tile unit = 0.75 m
    WHEELBASE_M = 0.07         # 7 cm wheelbase (kinematic bicycle)
    STEER_MAX_RAD = 0.34       # steer = 1 means 0.34 rad wheel angle
    SPEED_SCALE = 0.444        # speed indicator = m/s * 0.444
    GAS_SPEED_MPS = 1.0        # gas - brake = 1 commands 1 m/s
    # segment windows (nearest first). Tiles 0-1 are extrapolated outside the camera view
    # (bearing up to +-1.6 rad) and 3-5x noisier than tiles 2-8, so steering does not use them.
    MID_LO, MID_HI = 2, 5      # tiles 2-4: ~0.20-0.35 m ahead (positional correction)
    FAR_LO, FAR_HI = 5, 9      # tiles 5-8: ~0.43-0.65 m ahead (bend anticipation, lowest noise)
    KERB_LO, KERB_HI = 0, 8    # kerb flags looked at for a sharp bend coming
    MIN_DIST2_M2 = 0.01        # (0.1 m)^2 floor on squared lookahead distance (avoids blow-up)
    MIN_SPEED_MPS = 0.05       # floor for the diagnostic path curvature yaw/v
    STD_FLOOR = 1e-3           # keeps the Cholesky diagonal strictly positive

    def __init__(self):
        super().__init__()
        # --- steering: commanded path curvature = weighted pure-pursuit curvatures ---
        # fraction of the mid-range pure-pursuit curvature; geometry: g_mid + g_far ~ 1
        self.g_mid = nn.Parameter(torch.tensor([0.4]))
        # fraction of the far-range pure-pursuit curvature (last fit leaned on the far road)
        self.g_far = nn.Parameter(torch.tensor([0.6]))
        # servo trim [steer fraction]: mechanical centre offset of the RC car
        self.steer_trim = nn.Parameter(torch.tensor([0.0]))

        # --- speed schedule (m/s) ---
        # straight-road target speed (last fit: 0.55 m/s)
        self.v_straight = nn.Parameter(torch.tensor([0.55]))
        # slow-down per unit of curvature ahead [m/s per 1/m]: hairpin |k|~3 -> -0.15 m/s
        self.k_curv = nn.Parameter(torch.tensor([0.05]))
        # slow-down when the preview is fully kerbed [m/s] (last fit: 0.34)
        self.k_kerb = nn.Parameter(torch.tensor([0.3]))

        # --- brake: only on clear over-speed ---
        self.k_brake = nn.Parameter(torch.tensor([0.3]))       # brake fraction per m/s over target
        self.brake_bias = nn.Parameter(torch.tensor([-0.2]))   # dead zone (demo almost never brakes)

        # --- action noise (log std per action; last fit: 0.13, 0.12, 0.09) ---
        self.log_std_steer = nn.Parameter(torch.tensor([math.log(0.13)]))
        self.log_std_gas = nn.Parameter(torch.tensor([math.log(0.12)]))
        self.log_std_brake = nn.Parameter(torch.tensor([math.log(0.08)]))

    def forward(self, tiles, indicators):
        road_visible = torch.isfinite(tiles).flatten(1).all(dim=1).float()
        tiles = torch.nan_to_num(tiles, nan=0.0, posinf=0.0, neginf=0.0)
        indicators = torch.nan_to_num(indicators, nan=0.0, posinf=0.0, neginf=0.0)

        seg_x = tiles[:, :, 0]       # car lateral offset from segment centre line (units, + = car left)
        seg_y = tiles[:, :, 1]       # car along-road position rel. to segment (units, - = segment ahead)
        seg_th = tiles[:, :, 2]      # segment heading rel. to car (rad, + = road turns left)
        seg_border = tiles[:, :, 3]  # 1 = kerbed sharp bend

        # --- road centre points in the car frame (metres): rotate (-y, -x) by theta ---
        cos_th = torch.cos(seg_th)
        sin_th = torch.sin(seg_th)
        fwd_m = (-seg_y * cos_th + seg_x * sin_th) * self.UNIT_M
        left_m = (-seg_y * sin_th - seg_x * cos_th) * self.UNIT_M
        dist2 = torch.clamp(fwd_m * fwd_m + left_m * left_m, min=self.MIN_DIST2_M2)
        # pure-pursuit curvature of the arc tangent to the car heading through each point [1/m]
        kpp = 2.0 * left_m / dist2

        kpp_mid = kpp[:, self.MID_LO:self.MID_HI].mean(dim=1)
        kpp_far = kpp[:, self.FAR_LO:self.FAR_HI].mean(dim=1)
        kerb_ahead = seg_border[:, self.KERB_LO:self.KERB_HI].mean(dim=1)

        # diagnostics of where the road is
        x_mid = seg_x[:, self.MID_LO:self.MID_HI].mean(dim=1)
        left_mid_m = left_m[:, self.MID_LO:self.MID_HI].mean(dim=1)
        bearing_far = torch.atan2(left_m[:, self.FAR_LO:self.FAR_HI].mean(dim=1),
                                  fwd_m[:, self.FAR_LO:self.FAR_HI].mean(dim=1))
        dist_far_m = torch.sqrt(dist2[:, self.FAR_LO:self.FAR_HI].mean(dim=1))

        # --- vehicle state ---
        speed_mps = indicators[:, 0] / self.SPEED_SCALE
        yaw_rate = indicators[:, 2]
        motor_mps = indicators[:, 3] / self.SPEED_SCALE
        wheel_slip = motor_mps - speed_mps
        path_curvature = yaw_rate / torch.clamp(speed_mps, min=self.MIN_SPEED_MPS)

        # --- steering: commanded curvature -> kinematic bicycle wheel angle ---
        kappa_cmd = self.g_mid * kpp_mid + self.g_far * kpp_far          # [1/m], + = left
        steer_kin = -torch.atan(self.WHEELBASE_M * kappa_cmd) / self.STEER_MAX_RAD  # left = negative
        steer_raw = steer_kin + self.steer_trim
        steer = torch.clamp(steer_raw, -1.0, 1.0)

        # --- speed schedule ---
        v_target = (self.v_straight
                    - self.k_curv * torch.abs(kpp_far)
                    - self.k_kerb * kerb_ahead)
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

        # yaw rate the commanded steering should produce (CCW +)
        pred_yaw_rate = -speed_mps * torch.tan(self.STEER_MAX_RAD * steer) / self.WHEELBASE_M

        info = {
            'weight_g_mid': self.g_mid,
            'weight_g_far': self.g_far,
            'weight_steer_trim': self.steer_trim,
            'weight_v_straight': self.v_straight,
            'weight_k_curv': self.k_curv,
            'weight_k_kerb': self.k_kerb,
            'weight_k_brake': self.k_brake,
            'weight_brake_bias': self.brake_bias,
            'weight_std_steer': torch.exp(self.log_std_steer),
            'weight_std_gas': torch.exp(self.log_std_gas),
            'weight_std_brake': torch.exp(self.log_std_brake),
            'latent_road_visible': road_visible,
            'latent_kpp_mid': kpp_mid,
            'latent_kpp_far': kpp_far,
            'latent_kappa_cmd': kappa_cmd,
            'latent_steer_kin': steer_kin,
            'latent_steer_raw': steer_raw,
            'latent_x_mid': x_mid,
            'latent_left_mid_m': left_mid_m,
            'latent_bearing_far': bearing_far,
            'latent_dist_far_m': dist_far_m,
            'latent_kerb_ahead': kerb_ahead,
            'latent_speed_mps': speed_mps,
            'latent_yaw_rate': yaw_rate,
            'latent_path_curvature': path_curvature,
            'latent_pred_yaw_rate': pred_yaw_rate,
            'latent_wheel_slip': wheel_slip,
            'latent_v_target': v_target,
            'latent_speed_error': speed_error,
        }
        return action_mean, scale_tril, info
