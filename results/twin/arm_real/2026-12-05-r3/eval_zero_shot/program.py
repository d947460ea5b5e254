import math
import torch
import torch.nn as nn


class OpenDoorPolicy(nn.Module):
    # ---- observation layout (from the task description) ----
    I_TOOL = 0        # tool x, y, z (0-2), joint encoders
    I_GRIP = 3        # gripper opening reading: 1 open, 0 closed
    I_HANDLE = 4      # handle x, y, z (4-6), fiducial tag (stale when occluded)
    I_PREV_HANDLE = 22  # handle x, y, z one step earlier (18 + 4)
    I_TARGET = 36     # target handle position (36-38)

    # ---- numerical / safety constants ----
    EPS = 1e-6                  # guards divisions by lengths and sqrt at zero
    MIN_STD = 1e-3              # floor on every action std so the Cholesky diagonal stays positive
    HANDLE_MIN_NORM = 0.05      # m: a handle reading this close to the base origin means "no tag reading" (zeros)
    HANDLE_VALID_WIDTH = 0.05   # m: ramp width of that validity gate
    CONTROL_DT = 0.02           # s: 50 Hz control period (used only to report tag speed)

    def __init__(self):
        super().__init__()
        # ---------- reach phase ----------
        # tool position minus handle position at the grasp (m); ~0 if the fingers close around the bar
        self.grasp_off_x = nn.Parameter(torch.tensor(0.0))
        self.grasp_off_y = nn.Parameter(torch.tensor(0.0))
        self.grasp_off_z = nn.Parameter(torch.tensor(0.0))
        # height above the grasp point at which the tool travels before descending onto the bar (m)
        self.hover_height = nn.Parameter(torch.tensor(0.10))
        # horizontal distance to the grasp point below which the descent starts (m), and ramp width (m)
        self.align_radius = nn.Parameter(torch.tensor(0.04))
        self.align_width = nn.Parameter(torch.tensor(0.02))
        # proportional gains: action fraction per metre of position error
        # (20 /m * 0.1 m/s -> 0.5 s time constant, saturating beyond 5 cm of error)
        self.k_reach_xy = nn.Parameter(torch.tensor(20.0))
        self.k_reach_z = nn.Parameter(torch.tensor(20.0))

        # ---------- grasp ----------
        # 3-D distance to the grasp point below which the gripper closes (m), and ramp width (m)
        self.grasp_radius = nn.Parameter(torch.tensor(0.03))
        self.grasp_width = nn.Parameter(torch.tensor(0.01))
        # gripper commands for open and closed (command units: 1 open, 0 closed)
        self.grip_open_cmd = nn.Parameter(torch.tensor(1.0))
        self.grip_closed_cmd = nn.Parameter(torch.tensor(0.0))
        # finger reading below which the fingers are considered closed on something, and ramp width
        self.hold_threshold = nn.Parameter(torch.tensor(0.7))
        self.hold_width = nn.Parameter(torch.tensor(0.1))
        # finger reading below which the fingers closed on nothing (missed grasp), and ramp width
        self.empty_threshold = nn.Parameter(torch.tensor(0.03))
        self.empty_width = nn.Parameter(torch.tensor(0.03))

        # ---------- pull phase ----------
        # hinge-to-handle distance given by the user (m)
        self.door_radius = nn.Parameter(torch.tensor(0.4))
        # tangential pulling speed as a fraction of 0.1 m/s
        self.pull_speed = nn.Parameter(torch.tensor(0.6))
        # distance to the target over which the pull slows down linearly to zero (m)
        self.slow_dist = nn.Parameter(torch.tensor(0.05))

        # ---------- action noise (log std per action dim: dx, dy, dz, gripper) ----------
        self.log_std_reach = nn.Parameter(torch.tensor(
            [math.log(0.15), math.log(0.15), math.log(0.15), math.log(0.05)]))
        self.log_std_pull = nn.Parameter(torch.tensor(
            [math.log(0.15), math.log(0.15), math.log(0.10), math.log(0.05)]))

    @staticmethod
    def _ramp(x):
        # soft gate: linear between 0 and 1, clipped
        return torch.clamp(x, 0.0, 1.0)

    def _pos_width(self, w):
        # ramp widths must stay positive
        return torch.abs(w) + self.EPS

    def forward(self, features):
        f = torch.nan_to_num(features, nan=0.0, posinf=0.0, neginf=0.0)

        tool_x = f[:, self.I_TOOL + 0]
        tool_y = f[:, self.I_TOOL + 1]
        tool_z = f[:, self.I_TOOL + 2]
        grip_reading = f[:, self.I_GRIP]
        handle_x = f[:, self.I_HANDLE + 0]
        handle_y = f[:, self.I_HANDLE + 1]
        handle_z = f[:, self.I_HANDLE + 2]
        prev_handle_x = f[:, self.I_PREV_HANDLE + 0]
        prev_handle_y = f[:, self.I_PREV_HANDLE + 1]
        prev_handle_z = f[:, self.I_PREV_HANDLE + 2]
        target_x = f[:, self.I_TARGET + 0]
        target_y = f[:, self.I_TARGET + 1]

        # ---------- handle reading validity (zeros = no tag reading) ----------
        handle_norm = torch.sqrt(handle_x ** 2 + handle_y ** 2 + handle_z ** 2 + self.EPS)
        handle_valid = self._ramp((handle_norm - self.HANDLE_MIN_NORM) / self.HANDLE_VALID_WIDTH)
        # per-step tag displacement: exactly 0 while a stale sighting is repeated
        tag_step = torch.sqrt((handle_x - prev_handle_x) ** 2 + (handle_y - prev_handle_y) ** 2
                              + (handle_z - prev_handle_z) ** 2 + self.EPS) - math.sqrt(self.EPS)
        tag_speed = tag_step / self.CONTROL_DT

        # ---------- reach: hover above the grasp point, then descend ----------
        grasp_x = handle_x + self.grasp_off_x
        grasp_y = handle_y + self.grasp_off_y
        grasp_z = handle_z + self.grasp_off_z
        err_x = grasp_x - tool_x
        err_y = grasp_y - tool_y
        dist_xy_grasp = torch.sqrt(err_x ** 2 + err_y ** 2 + self.EPS)
        align = self._ramp((self.align_radius - dist_xy_grasp) / self._pos_width(self.align_width))
        goal_z = grasp_z + self.hover_height * (1.0 - align)
        err_z = goal_z - tool_z

        reach_vx = self.k_reach_xy * err_x * handle_valid
        reach_vy = self.k_reach_xy * err_y * handle_valid
        reach_vz = self.k_reach_z * err_z * handle_valid

        # ---------- grasp gates ----------
        dist_grasp = torch.sqrt(err_x ** 2 + err_y ** 2 + (grasp_z - tool_z) ** 2 + self.EPS)
        near = self._ramp((self.grasp_radius - dist_grasp) / self._pos_width(self.grasp_width)) * handle_valid
        # fingers stopped part-way = closed on the bar; fully closed = missed
        closed_on_something = self._ramp((self.hold_threshold - grip_reading) / self._pos_width(self.hold_width))
        not_empty = self._ramp((grip_reading - self.empty_threshold) / self._pos_width(self.empty_width))
        hold = closed_on_something * not_empty
        # soft OR: close when near the grasp point or already holding the bar
        close = 1.0 - (1.0 - near) * (1.0 - hold)

        # ---------- pull: tangent of the door circle through the handle and the target ----------
        # handle position inferred from the encoders (the tag is occluded/stale while held)
        held_x = tool_x - self.grasp_off_x
        held_y = tool_y - self.grasp_off_y
        chord_x = target_x - held_x
        chord_y = target_y - held_y
        chord_len = torch.sqrt(chord_x ** 2 + chord_y ** 2 + self.EPS)
        mid_x = 0.5 * (held_x + target_x)
        mid_y = 0.5 * (held_y + target_y)
        radius = torch.abs(self.door_radius) + self.EPS
        # distance from the chord midpoint to the hinge (circle centre)
        centre_offset = torch.sqrt(torch.clamp(radius ** 2 - 0.25 * chord_len ** 2, min=self.EPS))
        # the hinge is on the side of the chord obtained by turning it by -90 deg (left/forward of the handle)
        normal_x = chord_y / chord_len
        normal_y = -chord_x / chord_len
        hinge_x = mid_x + normal_x * centre_offset
        hinge_y = mid_y + normal_y * centre_offset
        arm_x = held_x - hinge_x
        arm_y = held_y - hinge_y
        arm_len = torch.sqrt(arm_x ** 2 + arm_y ** 2 + self.EPS)
        # tangent in the opening direction: closed door -> (-1, 0), i.e. pull towards the arm
        tangent_x = arm_y / arm_len
        tangent_y = -arm_x / arm_len
        # door opening angle estimate (0 = closed), for analysis only
        door_angle = torch.atan2(-arm_x, -arm_y + self.EPS)

        pull_speed_now = self.pull_speed * self._ramp(chord_len / self._pos_width(self.slow_dist))
        pull_vx = pull_speed_now * tangent_x
        pull_vy = pull_speed_now * tangent_y
        pull_vz = torch.zeros_like(tool_z)  # hinge is vertical: the handle keeps its height

        # ---------- blend phases and clip ----------
        dx = torch.clamp((1.0 - hold) * reach_vx + hold * pull_vx, -1.0, 1.0)
        dy = torch.clamp((1.0 - hold) * reach_vy + hold * pull_vy, -1.0, 1.0)
        dz = torch.clamp((1.0 - hold) * reach_vz + hold * pull_vz, -1.0, 1.0)
        grip_cmd = torch.clamp(self.grip_open_cmd + (self.grip_closed_cmd - self.grip_open_cmd) * close,
                               0.0, 1.0)
        action_mean = torch.stack([dx, dy, dz, grip_cmd], dim=1)

        # ---------- noise: per-phase std, blended by the hold gate ----------
        std_reach = torch.exp(self.log_std_reach).unsqueeze(0)
        std_pull = torch.exp(self.log_std_pull).unsqueeze(0)
        hold_col = hold.unsqueeze(1)
        std = self.MIN_STD + (1.0 - hold_col) * std_reach + hold_col * std_pull
        scale_tril = torch.diag_embed(std)

        # ---------- info ----------
        info = {}
        scalar_params = {
            'grasp_off_x': self.grasp_off_x, 'grasp_off_y': self.grasp_off_y, 'grasp_off_z': self.grasp_off_z,
            'hover_height': self.hover_height, 'align_radius': self.align_radius,
            'align_width': self.align_width, 'k_reach_xy': self.k_reach_xy, 'k_reach_z': self.k_reach_z,
            'grasp_radius': self.grasp_radius, 'grasp_width': self.grasp_width,
            'grip_open_cmd': self.grip_open_cmd, 'grip_closed_cmd': self.grip_closed_cmd,
            'hold_threshold': self.hold_threshold, 'hold_width': self.hold_width,
            'empty_threshold': self.empty_threshold, 'empty_width': self.empty_width,
            'door_radius': self.door_radius, 'pull_speed': self.pull_speed, 'slow_dist': self.slow_dist,
        }
        for name, p in scalar_params.items():
            info['weight_' + name] = p.reshape(1)
        action_names = ['dx', 'dy', 'dz', 'gripper']
        std_reach_vec = torch.exp(self.log_std_reach)
        std_pull_vec = torch.exp(self.log_std_pull)
        for i, an in enumerate(action_names):
            info['weight_std_reach_' + an] = std_reach_vec[i:i + 1]
            info['weight_std_pull_' + an] = std_pull_vec[i:i + 1]

        latents = {
            'handle_valid': handle_valid,
            'tag_speed': tag_speed,
            'grasp_goal_x': grasp_x, 'grasp_goal_y': grasp_y, 'reach_goal_z': goal_z,
            'dist_xy_to_grasp': dist_xy_grasp, 'dist_to_grasp': dist_grasp,
            'align': align, 'near': near,
            'closed_on_something': closed_on_something, 'not_empty': not_empty,
            'hold': hold, 'close': close,
            'reach_vx': reach_vx, 'reach_vy': reach_vy, 'reach_vz': reach_vz,
            'held_handle_x': held_x, 'held_handle_y': held_y,
            'chord_to_target': chord_len,
            'hinge_x': hinge_x, 'hinge_y': hinge_y,
            'tangent_x': tangent_x, 'tangent_y': tangent_y,
            'door_angle': door_angle,
            'pull_speed_now': pull_speed_now,
            'pull_vx': pull_vx, 'pull_vy': pull_vy,
            'tag_handle_to_target_y': target_y - handle_y,
            'held_handle_to_target_y': target_y - held_y,
            'std_dx': std[:, 0], 'std_dy': std[:, 1], 'std_dz': std[:, 2], 'std_gripper': std[:, 3],
        }
        for name, v in latents.items():
            info['latent_' + name] = v

        return action_mean, scale_tril, info
