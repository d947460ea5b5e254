import math
import torch
import torch.nn as nn


def _below(x: torch.Tensor, threshold: torch.Tensor, width: float) -> torch.Tensor:
    """Piecewise-linear gate: 1 when x is well below threshold, 0 when well above,
    0.5 at the threshold, linear over a band of the given width."""
    return torch.clamp(0.5 + (threshold - x) / width, 0.0, 1.0)


class OpenDoorPolicy(nn.Module):
    # ---- fixed constants of the setup ----
    DT = 0.02                 # s, commands and readings at 50 Hz
    SPEED_LIMIT = 0.1         # m/s per axis = one action unit
    EPS = 1e-6                # m, keeps norms and square roots differentiable at zero
    ALIGN_WIDTH = 0.01        # m, band over which the "aligned above handle" gate switches
    GRASP_WIDTH = 0.01        # m, band over which the "close enough to grasp" gate switches
    HOLD_WIDTH = 0.10         # gripper-opening band over which the "fingers closed on bar" gate switches
    EMPTY_WIDTH = 0.04        # gripper-opening band over which the "closed on nothing" gate switches
    MIN_RADIUS = 0.05         # m, lower bound on the door radius to keep the hinge estimate sane
    STALE_SPEED = 1e-4        # m/s, tag speed below which the reading is treated as a repeated sighting (logging only)

    def __init__(self):
        super().__init__()
        # --- approach ---
        # action units per metre of error: 0.1 m error -> full 0.1 m/s, time constant ~1 s
        self.k_approach_xy = nn.Parameter(torch.tensor([10.0]))
        self.k_approach_z = nn.Parameter(torch.tensor([10.0]))
        # tool position relative to the handle tag when the bar sits between the fingers (m)
        self.grasp_offset_x = nn.Parameter(torch.tensor([0.0]))
        self.grasp_offset_y = nn.Parameter(torch.tensor([0.0]))
        self.grasp_offset_z = nn.Parameter(torch.tensor([0.0]))
        # stay this far above the bar until aligned in x-y, then descend (m)
        self.hover_height = nn.Parameter(torch.tensor([0.05]))
        # x-y error under which the tool is considered aligned above the bar (m)
        self.align_radius = nn.Parameter(torch.tensor([0.015]))
        # 3-D error under which the gripper is commanded to close (m)
        self.grasp_radius = nn.Parameter(torch.tensor([0.015]))
        # --- gripper state interpretation (opening: 1 open, 0 closed) ---
        # opening below this -> fingers have closed on something (the bar)
        self.grip_hold_threshold = nn.Parameter(torch.tensor([0.8]))
        # opening below this -> fingers closed on nothing (missed grasp)
        self.grip_empty_threshold = nn.Parameter(torch.tensor([0.03]))
        # --- pulling along the door arc ---
        # hinge-to-handle distance given in the task description (m)
        self.door_radius = nn.Parameter(torch.tensor([0.4]))
        # action units per metre of remaining chord to the target
        self.k_pull = nn.Parameter(torch.tensor([10.0]))
        # cap on the pulling speed (action units; 0.7 -> 0.07 m/s, ~9 s for a quarter turn)
        self.pull_speed_max = nn.Parameter(torch.tensor([0.7]))
        # holds the tool at handle height while pulling (action units per metre)
        self.k_hold_z = nn.Parameter(torch.tensor([5.0]))
        # --- exploration / demonstration noise (log std per action) ---
        self.log_std_dx = nn.Parameter(torch.tensor([math.log(0.1)]))
        self.log_std_dy = nn.Parameter(torch.tensor([math.log(0.1)]))
        self.log_std_dz = nn.Parameter(torch.tensor([math.log(0.1)]))
        self.log_std_gripper = nn.Parameter(torch.tensor([math.log(0.05)]))

    def forward(self, features: torch.Tensor):
        f = torch.nan_to_num(features.float(), nan=0.0, posinf=0.0, neginf=0.0)
        f = torch.clamp(f, -10.0, 10.0)

        tool_x, tool_y, tool_z = f[:, 0], f[:, 1], f[:, 2]
        grip = f[:, 3]
        hx, hy, hz = f[:, 4], f[:, 5], f[:, 6]
        prev_hx, prev_hy, prev_hz = f[:, 22], f[:, 23], f[:, 24]
        prev_tool_x, prev_tool_y, prev_tool_z = f[:, 18], f[:, 19], f[:, 20]
        tgt_x, tgt_y, tgt_z = f[:, 36], f[:, 37], f[:, 38]

        # ================= Phase 1: approach and grasp =================
        # grasp point = tag position + grasp offset
        ex = hx + self.grasp_offset_x - tool_x
        ey = hy + self.grasp_offset_y - tool_y
        ez_grasp = hz + self.grasp_offset_z - tool_z
        dist_xy = torch.sqrt(ex * ex + ey * ey + self.EPS ** 2)
        # aligned above the bar in x-y -> allowed to descend
        align = _below(dist_xy, self.align_radius, self.ALIGN_WIDTH)
        # vertical goal: hover above the bar until aligned, then bar height
        ez_goal = ez_grasp + self.hover_height * (1.0 - align)
        dist_grasp = torch.sqrt(ex * ex + ey * ey + ez_grasp * ez_grasp + self.EPS ** 2)
        # fingers around the bar -> close
        near = _below(dist_grasp, self.grasp_radius, self.GRASP_WIDTH)

        a_app_x = self.k_approach_xy * ex
        a_app_y = self.k_approach_xy * ey
        a_app_z = self.k_approach_z * ez_goal

        # ================= gripper state =================
        # closed on nothing (missed): reopen and re-approach
        empty = _below(grip, self.grip_empty_threshold, self.EMPTY_WIDTH)
        # closed on the bar: holding the door (latches the grasp without memory)
        holding = _below(grip, self.grip_hold_threshold, self.HOLD_WIDTH) * (1.0 - empty)

        # ================= Phase 2: pull along the arc =================
        # handle position estimated from the encoders (the tag may be hidden or stale)
        hand_x = tool_x - self.grasp_offset_x
        hand_y = tool_y - self.grasp_offset_y
        dcx = tgt_x - hand_x
        dcy = tgt_y - hand_y
        chord = torch.sqrt(dcx * dcx + dcy * dcy + self.EPS ** 2)
        ux = dcx / chord
        uy = dcy / chord
        radius = torch.clamp(self.door_radius, min=self.MIN_RADIUS)
        half_chord = 0.5 * chord
        # distance from chord midpoint to the hinge (both points lie on the circle of radius R)
        apothem = torch.sqrt(torch.clamp(radius * radius - half_chord * half_chord, min=self.EPS))
        # door turns clockwise seen from above (handle from -y towards -x of the hinge):
        # the hinge lies to the right of the direction of travel, right of (ux, uy) is (uy, -ux)
        hinge_x = hand_x + 0.5 * dcx + apothem * uy
        hinge_y = hand_y + 0.5 * dcy - apothem * ux
        rx = hand_x - hinge_x
        ry = hand_y - hinge_y
        rnorm = torch.sqrt(rx * rx + ry * ry + self.EPS ** 2)
        # clockwise tangent at the handle: rotate the radial unit vector by -90 deg
        tan_x = ry / rnorm
        tan_y = -rx / rnorm
        # speed proportional to remaining chord, capped
        pull_speed = torch.minimum(torch.clamp(self.k_pull * chord, min=0.0), self.pull_speed_max)
        a_pull_x = pull_speed * tan_x
        a_pull_y = pull_speed * tan_y
        # vertical hinge: the handle keeps its height, given by the target height
        a_pull_z = self.k_hold_z * (tgt_z + self.grasp_offset_z - tool_z)

        # ================= blend phases and clip =================
        dx = torch.clamp((1.0 - holding) * a_app_x + holding * a_pull_x, -1.0, 1.0)
        dy = torch.clamp((1.0 - holding) * a_app_y + holding * a_pull_y, -1.0, 1.0)
        dz = torch.clamp((1.0 - holding) * a_app_z + holding * a_pull_z, -1.0, 1.0)
        close_drive = torch.clamp(near + holding, 0.0, 1.0) * (1.0 - empty)
        gripper = torch.clamp(1.0 - close_drive, 0.0, 1.0)
        action_mean = torch.stack([dx, dy, dz, gripper], dim=-1)

        # ================= noise model =================
        ones = torch.ones_like(dx).unsqueeze(-1)
        log_std = torch.cat([
            ones * self.log_std_dx,
            ones * self.log_std_dy,
            ones * self.log_std_dz,
            ones * self.log_std_gripper,
        ], dim=-1)
        std = torch.exp(torch.clamp(log_std, -7.0, 1.0))
        scale_tril = torch.diag_embed(std)

        # ================= logging =================
        handle_speed = torch.sqrt((hx - prev_hx) ** 2 + (hy - prev_hy) ** 2 + (hz - prev_hz) ** 2 + self.EPS ** 2) / self.DT
        tool_speed = torch.sqrt((tool_x - prev_tool_x) ** 2 + (tool_y - prev_tool_y) ** 2
                                + (tool_z - prev_tool_z) ** 2 + self.EPS ** 2) / self.DT
        tag_stale = (handle_speed < self.STALE_SPEED + self.EPS / self.DT).float().detach()
        door_angle = torch.atan2(ry, rx).detach()  # angle of handle about hinge (rad, -pi/2 closed)

        info = {}
        for name, p in self.named_parameters():
            info['weight_' + name] = p
        latents = {
            'err_grasp_x': ex, 'err_grasp_y': ey, 'err_grasp_z': ez_grasp,
            'err_goal_z': ez_goal,
            'dist_grasp_xy': dist_xy, 'dist_grasp_3d': dist_grasp,
            'gate_align': align, 'gate_near': near,
            'gate_holding': holding, 'gate_empty': empty,
            'handle_est_x': hand_x, 'handle_est_y': hand_y,
            'chord_to_target': chord, 'y_to_target': tgt_y - hand_y,
            'tag_y_to_target': tgt_y - hy,
            'hinge_est_x': hinge_x, 'hinge_est_y': hinge_y,
            'door_angle': door_angle,
            'tangent_x': tan_x, 'tangent_y': tan_y,
            'pull_speed': pull_speed,
            'app_cmd_x': a_app_x, 'app_cmd_y': a_app_y, 'app_cmd_z': a_app_z,
            'pull_cmd_x': a_pull_x, 'pull_cmd_y': a_pull_y, 'pull_cmd_z': a_pull_z,
            'close_drive': close_drive,
            'handle_speed': handle_speed, 'tool_speed': tool_speed,
            'tag_stale': tag_stale,
        }
        for name, v in latents.items():
            info['latent_' + name] = v
        return action_mean, scale_tril, info
