import math
import torch
import torch.nn as nn


class OpenDoorPolicy(nn.Module):
    # ---- observation layout (from the task description) ----
    I_TOOL = 0          # tool x, y, z (0-2), joint encoders
    I_GRIP = 3          # finger reading: 1 open, 0 closed (logged only)
    I_HANDLE = 4        # handle x, y, z (4-6), fiducial tag (may repeat a stale sighting)
    I_TARGET = 36       # target handle position (36-38)

    # ---- numerical / safety constants ----
    EPS = 1e-6                  # guards divisions by lengths and sqrt at zero
    MIN_STD = 1e-3              # floor on every action std so the Cholesky diagonal stays positive
    HANDLE_MIN_NORM = 0.05      # m: a handle reading this close to the base origin means "no tag reading"
    HANDLE_VALID_WIDTH = 0.05   # m: ramp width of that validity gate

    # ---- door geometry, measured ----
    # circle fitted to the logged handle path (113 fresh tag readings, rms 2 mm): hinge (0.608, 0.097),
    # radius 0.361 m; the target lies on the same circle (0.359 m)
    DOOR_RADIUS = 0.36

    # ---- phase-gate geometry (fixed: fitted clamp ramps have no gradient outside their band and collapsed) ----
    ALIGN_RADIUS = 0.04         # m: horizontal distance to the hook point at which the descent starts
    ALIGN_WIDTH = 0.02          # m: descent fully enabled within 2 cm
    ENGAGE_RADIUS = 0.18        # m: beyond this horizontal tool-to-hook distance the tool is off the handle
    ENGAGE_WIDTH = 0.06         # m: fully engaged within 12 cm (hook slack + up to 1.7 s of stale tag)
    ENGAGE_HEIGHT = 0.03        # m: pulling needs the tool at most this far above hook height (home: 4.4 cm)
    ENGAGE_HEIGHT_WIDTH = 0.015  # m: fully engaged within 1.5 cm above hook height

    def __init__(self):
        super().__init__()
        # ---------- hook point in the door frame (m) ----------
        # along hinge->handle (negative = towards the hinge); from the previous fit's base-frame offset
        self.hook_radial = nn.Parameter(torch.tensor(-0.02))
        # along the opening direction (negative = behind the bar, door side: the fingers pull it towards the arm)
        self.hook_tangential = nn.Parameter(torch.tensor(-0.066))
        # height of the hook point above the handle tag
        self.hook_off_z = nn.Parameter(torch.tensor(0.0))

        # ---------- reach ----------
        self.hover_height = nn.Parameter(torch.tensor(0.10))   # m above the hook point while travelling
        self.k_reach_xy = nn.Parameter(torch.tensor(25.0))     # action fraction per metre (0.4 s time constant)
        self.k_reach_z = nn.Parameter(torch.tensor(15.0))      # action fraction per metre

        # ---------- gripper ----------
        # 3-D distance to the hook point below which the gripper closes (the demonstration closes early)
        self.grasp_radius = nn.Parameter(torch.tensor(0.10))
        self.grasp_width = nn.Parameter(torch.tensor(0.03))
        self.grip_far_cmd = nn.Parameter(torch.tensor(1.0))    # command away from the handle (1 open)
        self.grip_near_cmd = nn.Parameter(torch.tensor(0.0))   # command at / on the handle (0 closed)

        # ---------- pull ----------
        self.pull_speed = nn.Parameter(torch.tensor(0.6))      # tangential speed, fraction of 0.1 m/s
        self.slow_angle = nn.Parameter(torch.tensor(0.15))     # rad of remaining door angle over which to slow down
        self.k_hold_z = nn.Parameter(torch.tensor(8.0))        # action fraction per metre, holds hook height

        # ---------- action noise (log std per action: dx, dy, dz, gripper) ----------
        self.log_std_reach = nn.Parameter(torch.tensor(
            [math.log(0.15), math.log(0.15), math.log(0.15), math.log(0.05)]))
        self.log_std_pull = nn.Parameter(torch.tensor(
            [math.log(0.15), math.log(0.15), math.log(0.10), math.log(0.05)]))

    @staticmethod
    def _ramp(x):
        # soft gate: linear between 0 and 1, clipped
        return torch.clamp(x, 0.0, 1.0)

    def forward(self, features):
        f = torch.nan_to_num(features, nan=0.0, posinf=0.0, neginf=0.0)

        tool_x = f[:, self.I_TOOL + 0]
        tool_y = f[:, self.I_TOOL + 1]
        tool_z = f[:, self.I_TOOL + 2]
        finger_reading = f[:, self.I_GRIP]
        handle_x = f[:, self.I_HANDLE + 0]
        handle_y = f[:, self.I_HANDLE + 1]
        handle_z = f[:, self.I_HANDLE + 2]
        target_x = f[:, self.I_TARGET + 0]
        target_y = f[:, self.I_TARGET + 1]

        # ---------- tag validity (zeros = no reading) ----------
        handle_norm = torch.sqrt(handle_x ** 2 + handle_y ** 2 + handle_z ** 2 + self.EPS)
        handle_valid = self._ramp((handle_norm - self.HANDLE_MIN_NORM) / self.HANDLE_VALID_WIDTH)

        # ---------- hinge: centre of the door circle through the handle tag and the target ----------
        # any point of the circle gives the same centre, so a stale tag still gives the right hinge
        chord_x = target_x - handle_x
        chord_y = target_y - handle_y
        chord_len = torch.sqrt(chord_x ** 2 + chord_y ** 2 + self.EPS)
        centre_offset = torch.sqrt(torch.clamp(self.DOOR_RADIUS ** 2 - 0.25 * chord_len ** 2, min=self.EPS))
        # centre on the side of the chord turned by -90 deg (beyond and left of the closed handle)
        hinge_x = 0.5 * (handle_x + target_x) + (chord_y / chord_len) * centre_offset
        hinge_y = 0.5 * (handle_y + target_y) - (chord_x / chord_len) * centre_offset

        # ---------- door frame at the handle ----------
        hr_x = handle_x - hinge_x
        hr_y = handle_y - hinge_y
        hr_len = torch.sqrt(hr_x ** 2 + hr_y ** 2 + self.EPS)
        radial_x = hr_x / hr_len
        radial_y = hr_y / hr_len
        opening_x = radial_y            # radial turned by -90 deg: direction the handle moves when opening
        opening_y = -radial_x

        # ---------- hook point (turns with the door) ----------
        hook_x = handle_x + self.hook_radial * radial_x + self.hook_tangential * opening_x
        hook_y = handle_y + self.hook_radial * radial_y + self.hook_tangential * opening_y
        hook_z = handle_z + self.hook_off_z
        err_x = hook_x - tool_x
        err_y = hook_y - tool_y
        height_above_hook = tool_z - hook_z
        dist_xy_hook = torch.sqrt(err_x ** 2 + err_y ** 2 + self.EPS)
        dist_hook = torch.sqrt(err_x ** 2 + err_y ** 2 + height_above_hook ** 2 + self.EPS)

        # ---------- reach: travel above the hook point, descend once aligned ----------
        align = self._ramp((self.ALIGN_RADIUS - dist_xy_hook) / self.ALIGN_WIDTH)
        goal_z = hook_z + self.hover_height * (1.0 - align)
        reach_vx = self.k_reach_xy * err_x * handle_valid
        reach_vy = self.k_reach_xy * err_y * handle_valid
        reach_vz = self.k_reach_z * (goal_z - tool_z) * handle_valid

        # ---------- engagement: down at hook height and at the hook point ----------
        engage_xy = self._ramp((self.ENGAGE_RADIUS - dist_xy_hook) / self.ENGAGE_WIDTH)
        engage_z = self._ramp((self.ENGAGE_HEIGHT - height_above_hook) / self.ENGAGE_HEIGHT_WIDTH)
        engage = engage_xy * engage_z * handle_valid

        # ---------- gripper ----------
        near = self._ramp((self.grasp_radius - dist_hook) / (torch.abs(self.grasp_width) + self.EPS)) * handle_valid
        close = 1.0 - (1.0 - near) * (1.0 - engage)
        grip_cmd = torch.clamp(self.grip_far_cmd + (self.grip_near_cmd - self.grip_far_cmd) * close, 0.0, 1.0)

        # ---------- pull: tangent of the tool's own circle about the hinge ----------
        tr_x = tool_x - hinge_x
        tr_y = tool_y - hinge_y
        tr_len = torch.sqrt(tr_x ** 2 + tr_y ** 2 + self.EPS)
        tangent_x = tr_y / tr_len
        tangent_y = -tr_x / tr_len
        # remaining opening angle of the handle (rad): clockwise angle from the tool to the target about the
        # hinge, plus the fixed angular lead of the hook point over the handle
        gr_x = target_x - hinge_x
        gr_y = target_y - hinge_y
        cross_tg = tr_x * gr_y - tr_y * gr_x
        dot_tg = tr_x * gr_x + tr_y * gr_y
        tool_to_target_angle = -torch.atan2(cross_tg, dot_tg)
        hook_lead_angle = torch.atan2(self.hook_tangential, self.DOOR_RADIUS + self.hook_radial)
        handle_remaining_angle = tool_to_target_angle + hook_lead_angle

        pull_speed_now = self.pull_speed * self._ramp(
            handle_remaining_angle / (torch.abs(self.slow_angle) + self.EPS))
        pull_vx = pull_speed_now * tangent_x
        pull_vy = pull_speed_now * tangent_y
        pull_vz = self.k_hold_z * (hook_z - tool_z) * handle_valid   # vertical hinge: hook height is constant

        # ---------- blend and clip ----------
        dx = torch.clamp((1.0 - engage) * reach_vx + engage * pull_vx, -1.0, 1.0)
        dy = torch.clamp((1.0 - engage) * reach_vy + engage * pull_vy, -1.0, 1.0)
        dz = torch.clamp((1.0 - engage) * reach_vz + engage * pull_vz, -1.0, 1.0)
        action_mean = torch.stack([dx, dy, dz, grip_cmd], dim=1)

        # ---------- noise: per-phase std blended by engagement ----------
        std_reach = torch.exp(self.log_std_reach).unsqueeze(0)
        std_pull = torch.exp(self.log_std_pull).unsqueeze(0)
        engage_col = engage.unsqueeze(1)
        std = self.MIN_STD + (1.0 - engage_col) * std_reach + engage_col * std_pull
        scale_tril = torch.diag_embed(std)

        # ---------- info ----------
        info = {}
        scalar_params = {
            'hook_radial': self.hook_radial, 'hook_tangential': self.hook_tangential,
            'hook_off_z': self.hook_off_z, 'hover_height': self.hover_height,
            'k_reach_xy': self.k_reach_xy, 'k_reach_z': self.k_reach_z,
            'grasp_radius': self.grasp_radius, 'grasp_width': self.grasp_width,
            'grip_far_cmd': self.grip_far_cmd, 'grip_near_cmd': self.grip_near_cmd,
            'pull_speed': self.pull_speed, 'slow_angle': self.slow_angle, 'k_hold_z': self.k_hold_z,
        }
        for name, p in scalar_params.items():
            info['weight_' + name] = p.reshape(1)
        std_reach_vec = torch.exp(self.log_std_reach)
        std_pull_vec = torch.exp(self.log_std_pull)
        for i, an in enumerate(['dx', 'dy', 'dz', 'gripper']):
            info['weight_std_reach_' + an] = std_reach_vec[i:i + 1]
            info['weight_std_pull_' + an] = std_pull_vec[i:i + 1]

        latents = {
            'handle_valid': handle_valid,
            'finger_reading': finger_reading,
            'hinge_x': hinge_x, 'hinge_y': hinge_y,
            'handle_radius': hr_len,
            'radial_x': radial_x, 'radial_y': radial_y,
            'opening_x': opening_x, 'opening_y': opening_y,
            'hook_goal_x': hook_x, 'hook_goal_y': hook_y, 'hook_goal_z': hook_z,
            'reach_goal_z': goal_z,
            'dist_xy_to_hook': dist_xy_hook, 'dist_to_hook': dist_hook,
            'height_above_hook': height_above_hook,
            'align': align,
            'engage_xy': engage_xy, 'engage_z': engage_z, 'engage': engage,
            'near': near, 'close': close,
            'reach_vx': reach_vx, 'reach_vy': reach_vy, 'reach_vz': reach_vz,
            'tool_radius': tr_len,
            'tangent_x': tangent_x, 'tangent_y': tangent_y,
            'tool_to_target_angle': tool_to_target_angle,
            'handle_remaining_angle': handle_remaining_angle,
            'pull_speed_now': pull_speed_now,
            'pull_vx': pull_vx, 'pull_vy': pull_vy, 'pull_vz': pull_vz,
            'tag_handle_to_target_y': target_y - handle_y,
            'std_dx': std[:, 0], 'std_dy': std[:, 1], 'std_dz': std[:, 2], 'std_gripper': std[:, 3],
        }
        for name, val in latents.items():
            info['latent_' + name] = val

        return action_mean, scale_tril, info
