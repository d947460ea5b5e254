import math
import torch
import torch.nn as nn


class OpenDoorPolicy(nn.Module):
    # Action bounds: every action dimension of the arm interface lies in [-1, 1].
    ACTION_LOW = -1.0
    ACTION_HIGH = 1.0
    # Numerical constant that keeps sqrt differentiable at zero length (m^2).
    DIST_EPS = 1e-6
    # Workspace coordinates are below 2 m; larger values are corrupt inputs and get clipped.
    OBS_LIMIT = 10.0
    # Lower bound that keeps gate widths positive (m).
    MIN_WIDTH = 1e-3
    # A hook behind the bar can only pull the door open: the tangential drive is never negative.
    MIN_DRIVE = 0.0
    # Range for the log standard deviations (keeps the Cholesky diagonal positive and finite).
    LOG_STD_LOW = -6.0
    LOG_STD_HIGH = 1.0

    def __init__(self):
        super().__init__()
        # --- Pre-grasp point in the door frame (m) ---
        # Behind the handle bar (towards the door, -t) so the closed fingers hook it,
        # and slightly outward along the bar (+r), away from the hinge.
        self.grasp_t = nn.Parameter(torch.tensor(-0.04))
        self.grasp_r = nn.Parameter(torch.tensor(0.02))
        # Descent target height relative to the handle: drive fingertips below the bar (m).
        self.grasp_dz = nn.Parameter(torch.tensor(-0.12))
        # Approach from above the handle so the gripper clears door and bar (m).
        self.hover_dz = nn.Parameter(torch.tensor(0.25))

        # --- Pull phase ---
        # Height held while pulling, relative to the handle (m).
        self.pull_dz = nn.Parameter(torch.tensor(0.0))
        # Radial contact point along the bar held while pulling (m).
        self.pull_r = nn.Parameter(torch.tensor(0.05))
        # Base drive along the opening tangent (action units); previous fit ~0.7.
        self.k_open = nn.Parameter(torch.tensor(0.7))
        # Extra drive per metre of remaining (signed) opening along t (action units / m); ~1.5.
        self.k_open_s = nn.Parameter(torch.tensor(1.5))
        # Radial hold gain along the bar (action units / m).
        self.gain_rad = nn.Parameter(torch.tensor(10.0))

        # --- Phase switching (m) ---
        # Descend once the hand is within ~15-20 cm (x-y) of the pre-grasp point.
        self.xy_thresh = nn.Parameter(torch.tensor(0.17))
        self.xy_width = nn.Parameter(torch.tensor(0.02))
        # Pull once the hand is at handle level (one-sided gate on height above the handle).
        self.z_thresh = nn.Parameter(torch.tensor(0.01))
        self.z_width = nn.Parameter(torch.tensor(0.05))

        # --- Proportional gains for the approach/descend servo (action units / m) ---
        # Scripted experts use p = 10; previous fits gave 10-14.
        self.gain_xy = nn.Parameter(torch.tensor(10.0))
        self.gain_z = nn.Parameter(torch.tensor(10.0))

        # --- Gripper command (1 open, 0 close); the demonstration keeps it constant (closed) ---
        self.grip_level = nn.Parameter(torch.tensor(0.0))

        # --- Per-action noise (log std, action units) ---
        self.log_std_dx = nn.Parameter(torch.tensor(math.log(0.15)))
        self.log_std_dy = nn.Parameter(torch.tensor(math.log(0.15)))
        self.log_std_dz = nn.Parameter(torch.tensor(math.log(0.06)))
        self.log_std_grip = nn.Parameter(torch.tensor(math.log(0.02)))

    def forward(self, features):
        f = torch.nan_to_num(features, nan=0.0, posinf=self.OBS_LIMIT, neginf=-self.OBS_LIMIT)
        f = torch.clamp(f, -self.OBS_LIMIT, self.OBS_LIMIT)

        # --- Observation decoding ---
        hand_x, hand_y, hand_z = f[:, 0], f[:, 1], f[:, 2]
        grip_state = f[:, 3]
        handle_x, handle_y, handle_z = f[:, 4], f[:, 5], f[:, 6]
        qx, qy, qz, qw = f[:, 7], f[:, 8], f[:, 9], f[:, 10]
        prev_handle_x, prev_handle_y = f[:, 22], f[:, 23]
        goal_x, goal_y, goal_z = f[:, 36], f[:, 37], f[:, 38]

        # --- Door frame from the handle quaternion (x, y, z, w) ---
        # 2nd rotation-matrix column: opening tangent (the handle moves along +t as the door opens).
        tan_raw_x = 2.0 * (qx * qy - qz * qw)
        tan_raw_y = 1.0 - 2.0 * (qx * qx + qz * qz)
        tan_norm = torch.sqrt(tan_raw_x * tan_raw_x + tan_raw_y * tan_raw_y + self.DIST_EPS)
        tan_x = tan_raw_x / tan_norm
        tan_y = tan_raw_y / tan_norm
        # 3rd column: radial direction along the handle bar, pointing away from the hinge.
        rad_raw_x = 2.0 * (qx * qz + qy * qw)
        rad_raw_y = 2.0 * (qy * qz - qx * qw)
        rad_norm = torch.sqrt(rad_raw_x * rad_raw_x + rad_raw_y * rad_raw_y + self.DIST_EPS)
        rad_x = rad_raw_x / rad_norm
        rad_y = rad_raw_y / rad_norm

        # --- Hand relative to the handle, in the door frame (m) ---
        off_x = hand_x - handle_x
        off_y = hand_y - handle_y
        rel_t = off_x * tan_x + off_y * tan_y
        rel_r = off_x * rad_x + off_y * rad_y
        rel_z = hand_z - handle_z

        # --- Remaining opening: signed handle-to-goal offset along the opening tangent (m) ---
        s_remaining = (goal_x - handle_x) * tan_x + (goal_y - handle_y) * tan_y
        goal_dist = torch.sqrt((goal_x - handle_x) ** 2 + (goal_y - handle_y) ** 2
                               + (goal_z - handle_z) ** 2 + self.DIST_EPS)

        # --- Pre-grasp point and x-y distance to it ---
        grasp_x = handle_x + self.grasp_t * tan_x + self.grasp_r * rad_x
        grasp_y = handle_y + self.grasp_t * tan_y + self.grasp_r * rad_y
        err_x = grasp_x - hand_x
        err_y = grasp_y - hand_y
        xy_err = torch.sqrt(err_x * err_x + err_y * err_y + self.DIST_EPS)

        # --- Phase gates (piecewise linear) ---
        xy_w = torch.clamp(self.xy_width, min=self.MIN_WIDTH)
        z_w = torch.clamp(self.z_width, min=self.MIN_WIDTH)
        gate_xy_far = torch.clamp((xy_err - self.xy_thresh) / xy_w, 0.0, 1.0)
        # One-sided: 1 while the hand is still above the handle, 0 once at handle level.
        gate_high = torch.clamp((rel_z - self.z_thresh) / z_w, 0.0, 1.0)

        phase_approach = gate_xy_far
        phase_descend = (1.0 - gate_xy_far) * gate_high
        phase_pull = (1.0 - gate_xy_far) * (1.0 - gate_high)

        # --- Approach / descend: servo to the pre-grasp point in x-y ---
        reach_x = self.gain_xy * err_x
        reach_y = self.gain_xy * err_y

        # --- Pull: non-negative drive along the tangent + radial hold along the bar ---
        drive = torch.clamp(self.k_open + self.k_open_s * s_remaining, min=self.MIN_DRIVE)
        radial_cmd = self.gain_rad * (self.pull_r - rel_r)
        pull_x = drive * tan_x + radial_cmd * rad_x
        pull_y = drive * tan_y + radial_cmd * rad_y

        dx_raw = (1.0 - phase_pull) * reach_x + phase_pull * pull_x
        dy_raw = (1.0 - phase_pull) * reach_y + phase_pull * pull_y

        # --- Height: phase mix of hover / descent / pull heights relative to the handle ---
        desired_z = handle_z + (phase_approach * self.hover_dz
                                + phase_descend * self.grasp_dz
                                + phase_pull * self.pull_dz)
        dz_raw = self.gain_z * (desired_z - hand_z)

        dx = torch.clamp(dx_raw, self.ACTION_LOW, self.ACTION_HIGH)
        dy = torch.clamp(dy_raw, self.ACTION_LOW, self.ACTION_HIGH)
        dz = torch.clamp(dz_raw, self.ACTION_LOW, self.ACTION_HIGH)
        grip_cmd = torch.clamp(self.grip_level * torch.ones_like(dx), self.ACTION_LOW, self.ACTION_HIGH)

        action_mean = torch.stack([dx, dy, dz, grip_cmd], dim=1)

        # --- Diagonal Gaussian noise ---
        std_row = torch.exp(torch.clamp(torch.stack([
            self.log_std_dx, self.log_std_dy, self.log_std_dz, self.log_std_grip]),
            self.LOG_STD_LOW, self.LOG_STD_HIGH))
        std = torch.ones_like(dx).unsqueeze(1) * std_row.unsqueeze(0)
        scale_tril = torch.diag_embed(std)

        # --- Diagnostics ---
        handle_vx = handle_x - prev_handle_x
        handle_vy = handle_y - prev_handle_y
        handle_speed_t = handle_vx * tan_x + handle_vy * tan_y     # door-opening progress per step
        handle_speed_r = handle_vx * rad_x + handle_vy * rad_y     # should stay ~0 (rigid arc)
        door_yaw = 2.0 * torch.atan2(qz, qw)

        info = {}
        for pname, pval in self.named_parameters():
            info['weight_' + pname] = pval.reshape(1)

        info.update({
            'latent_tangent_x': tan_x,
            'latent_tangent_y': tan_y,
            'latent_radial_x': rad_x,
            'latent_radial_y': rad_y,
            'latent_rel_t': rel_t,
            'latent_rel_r': rel_r,
            'latent_rel_z': rel_z,
            'latent_xy_err': xy_err,
            'latent_gate_xy_far': gate_xy_far,
            'latent_gate_high': gate_high,
            'latent_phase_approach': phase_approach,
            'latent_phase_descend': phase_descend,
            'latent_phase_pull': phase_pull,
            'latent_desired_z': desired_z,
            'latent_s_remaining': s_remaining,
            'latent_goal_dist': goal_dist,
            'latent_drive': drive,
            'latent_radial_cmd': radial_cmd,
            'latent_reach_x': reach_x,
            'latent_reach_y': reach_y,
            'latent_pull_x': pull_x,
            'latent_pull_y': pull_y,
            'latent_handle_speed_t': handle_speed_t,
            'latent_handle_speed_r': handle_speed_r,
            'latent_gripper_state': grip_state,
            'latent_door_yaw': door_yaw,
        })

        return action_mean, scale_tril, info
