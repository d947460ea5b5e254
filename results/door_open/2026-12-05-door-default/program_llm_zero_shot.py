import math
import torch
import torch.nn as nn


class OpenDoorPolicy(nn.Module):
    # Action bounds: every action dimension of the arm interface lies in [-1, 1]
    # (delta-position units; the environment clips again after sampling).
    ACTION_LOW = -1.0
    ACTION_HIGH = 1.0
    # Numerical constant that keeps sqrt differentiable at zero distance (m^2).
    DIST_EPS = 1e-6
    # Workspace coordinates are below 2 m; larger values are corrupt inputs and get clipped.
    OBS_LIMIT = 10.0
    # Lower bounds that keep gate widths and thresholds physically valid (m).
    MIN_WIDTH = 1e-3
    # Range for the log standard deviations (keeps the Cholesky diagonal positive and finite).
    LOG_STD_LOW = -5.0
    LOG_STD_HIGH = 1.0

    def __init__(self):
        super().__init__()
        # --- Grasp point relative to the handle position (m) ---
        # Scripted door experts place the gripper about 1 cm on the +x side of the handle
        # (handle x - 0.05 + 0.06), at the handle's own height, so that moving in -x drags it.
        self.grasp_dx = nn.Parameter(torch.tensor(0.01))
        self.grasp_dy = nn.Parameter(torch.tensor(0.0))
        self.grasp_dz = nn.Parameter(torch.tensor(0.0))

        # --- Hover waypoint above the grasp point during the x-y approach (m) ---
        # Approach from about 20 cm above the handle so the gripper clears the door.
        self.hover_dy = nn.Parameter(torch.tensor(0.02))
        self.hover_dz = nn.Parameter(torch.tensor(0.20))

        # --- Pull target relative to the CURRENT handle position (m) ---
        # The door opens when the handle moves towards -x (and swings towards the robot), so
        # the gripper tracks a point about 10 cm behind the handle in -x.
        self.pull_dx = nn.Parameter(torch.tensor(-0.10))
        self.pull_dy = nn.Parameter(torch.tensor(0.0))
        self.pull_dz = nn.Parameter(torch.tensor(0.0))

        # --- Phase switching (m) ---
        # Descend once the x-y error is below about 12 cm (gate ramps between 10 and 14 cm).
        self.xy_thresh = nn.Parameter(torch.tensor(0.10))
        self.xy_width = nn.Parameter(torch.tensor(0.04))
        # Pull once the height error is below about 4 cm (gate ramps between 3 and 5 cm).
        self.z_thresh = nn.Parameter(torch.tensor(0.03))
        self.z_width = nn.Parameter(torch.tensor(0.02))

        # --- Proportional gains (action units per metre of position error) ---
        # Scripted experts use p = 10: a 10 cm error gives a saturated action.
        self.gain_xy = nn.Parameter(torch.tensor(10.0))
        self.gain_z = nn.Parameter(torch.tensor(10.0))

        # --- Gripper command (1 open, 0 close) ---
        # Open during approach and descent, closed around/behind the handle while pulling.
        self.grip_approach = nn.Parameter(torch.tensor(1.0))
        self.grip_pull = nn.Parameter(torch.tensor(0.0))

        # --- Exploration / demonstration noise per action (log std, action units) ---
        self.log_std_dx = nn.Parameter(torch.tensor(math.log(0.2)))
        self.log_std_dy = nn.Parameter(torch.tensor(math.log(0.2)))
        self.log_std_dz = nn.Parameter(torch.tensor(math.log(0.2)))
        self.log_std_grip = nn.Parameter(torch.tensor(math.log(0.3)))

    def forward(self, features):
        f = torch.nan_to_num(features, nan=0.0, posinf=self.OBS_LIMIT, neginf=-self.OBS_LIMIT)
        f = torch.clamp(f, -self.OBS_LIMIT, self.OBS_LIMIT)

        # --- Observation decoding ---
        hand_x, hand_y, hand_z = f[:, 0], f[:, 1], f[:, 2]
        grip_state = f[:, 3]
        handle_x, handle_y, handle_z = f[:, 4], f[:, 5], f[:, 6]
        quat_0, quat_1, quat_2, quat_3 = f[:, 7], f[:, 8], f[:, 9], f[:, 10]
        prev_hand_x, prev_hand_y, prev_hand_z = f[:, 18], f[:, 19], f[:, 20]
        prev_handle_x, prev_handle_y, prev_handle_z = f[:, 22], f[:, 23], f[:, 24]
        goal_x, goal_y, goal_z = f[:, 36], f[:, 37], f[:, 38]

        # --- Grasp point and errors (m) ---
        grasp_x = handle_x + self.grasp_dx
        grasp_y = handle_y + self.grasp_dy
        grasp_z = handle_z + self.grasp_dz
        err_x = grasp_x - hand_x
        err_y = grasp_y - hand_y
        err_z = grasp_z - hand_z
        xy_err = torch.sqrt(err_x * err_x + err_y * err_y + self.DIST_EPS)
        z_err_mag = torch.sqrt(err_z * err_z + self.DIST_EPS)

        # --- Piecewise-linear phase gates (1 = still far) ---
        xy_w = torch.clamp(self.xy_width, min=self.MIN_WIDTH)
        z_w = torch.clamp(self.z_width, min=self.MIN_WIDTH)
        xy_th = torch.clamp(self.xy_thresh, min=0.0)
        z_th = torch.clamp(self.z_thresh, min=0.0)
        gate_xy_far = torch.clamp((xy_err - xy_th) / xy_w, 0.0, 1.0)
        gate_z_far = torch.clamp((z_err_mag - z_th) / z_w, 0.0, 1.0)

        phase_approach = gate_xy_far
        phase_descend = (1.0 - gate_xy_far) * gate_z_far
        phase_pull = (1.0 - gate_xy_far) * (1.0 - gate_z_far)

        # --- Waypoints of each phase (m) ---
        hover_x = grasp_x
        hover_y = grasp_y + self.hover_dy
        hover_z = grasp_z + self.hover_dz
        pull_x = handle_x + self.pull_dx
        pull_y = handle_y + self.pull_dy
        pull_z = handle_z + self.pull_dz

        desired_x = phase_approach * hover_x + phase_descend * grasp_x + phase_pull * pull_x
        desired_y = phase_approach * hover_y + phase_descend * grasp_y + phase_pull * pull_y
        desired_z = phase_approach * hover_z + phase_descend * grasp_z + phase_pull * pull_z

        # --- Proportional position control, clipped per action ---
        dx = torch.clamp(self.gain_xy * (desired_x - hand_x), self.ACTION_LOW, self.ACTION_HIGH)
        dy = torch.clamp(self.gain_xy * (desired_y - hand_y), self.ACTION_LOW, self.ACTION_HIGH)
        dz = torch.clamp(self.gain_z * (desired_z - hand_z), self.ACTION_LOW, self.ACTION_HIGH)

        # --- Gripper: open while approaching, closed while pulling ---
        grip_cmd = self.grip_approach + (self.grip_pull - self.grip_approach) * phase_pull
        grip_cmd = torch.clamp(grip_cmd, self.ACTION_LOW, self.ACTION_HIGH)

        action_mean = torch.stack([dx, dy, dz, grip_cmd], dim=1)

        # --- Diagonal Gaussian noise ---
        std_row = torch.exp(torch.clamp(torch.stack([
            self.log_std_dx, self.log_std_dy, self.log_std_dz, self.log_std_grip]),
            self.LOG_STD_LOW, self.LOG_STD_HIGH))
        ones_b = torch.ones_like(dx).unsqueeze(1)            # (B, 1)
        std = ones_b * std_row.unsqueeze(0)                   # (B, 4)
        scale_tril = torch.diag_embed(std)

        # --- Diagnostics (logged only, not on the action path) ---
        handle_to_goal = torch.sqrt((goal_x - handle_x) ** 2 + (goal_y - handle_y) ** 2
                                    + (goal_z - handle_z) ** 2 + self.DIST_EPS)
        handle_speed = torch.sqrt((handle_x - prev_handle_x) ** 2 + (handle_y - prev_handle_y) ** 2
                                  + (handle_z - prev_handle_z) ** 2 + self.DIST_EPS)
        hand_speed = torch.sqrt((hand_x - prev_hand_x) ** 2 + (hand_y - prev_hand_y) ** 2
                                + (hand_z - prev_hand_z) ** 2 + self.DIST_EPS)
        # Door yaw about the vertical axis, assuming quaternion order (x, y, z, w).
        door_yaw = 2.0 * torch.atan2(quat_2, quat_3)

        info = {}
        for pname, pval in self.named_parameters():
            info['weight_' + pname] = pval.reshape(1)

        info.update({
            'latent_hand_to_grasp_x': err_x,
            'latent_hand_to_grasp_y': err_y,
            'latent_hand_to_grasp_z': err_z,
            'latent_xy_err': xy_err,
            'latent_z_err_mag': z_err_mag,
            'latent_gate_xy_far': gate_xy_far,
            'latent_gate_z_far': gate_z_far,
            'latent_phase_approach': phase_approach,
            'latent_phase_descend': phase_descend,
            'latent_phase_pull': phase_pull,
            'latent_desired_x': desired_x,
            'latent_desired_y': desired_y,
            'latent_desired_z': desired_z,
            'latent_handle_to_goal_dist': handle_to_goal,
            'latent_handle_speed': handle_speed,
            'latent_hand_speed': hand_speed,
            'latent_gripper_state': grip_state,
            'latent_door_yaw': door_yaw,
            'latent_quat_0': quat_0,
            'latent_quat_1': quat_1,
            'latent_quat_2': quat_2,
            'latent_quat_3': quat_3,
        })

        return action_mean, scale_tril, info
