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
    EPS = 1e-6                # m, keeps norms differentiable at zero
    ALIGN_WIDTH = 0.02        # m, ramp of the "lined up above the bar" gate (tag jitter ~1 cm)
    GRASP_WIDTH = 0.02        # m, ramp of the "bar between the fingers" gate (tag jitter ~1 cm)
    ZBAND_WIDTH = 0.02        # m, ramp of the "tool at bar height" gate
    HOLD_WIDTH = 0.10         # opening units, ramp of the "fingers closed" gate
    EMPTY_WIDTH = 0.03        # opening units, ramp of the "closed on nothing" gate
    SETTLE_WIDTH = 0.004      # opening units per step, ramp of the "fingers stopped moving" gate
    MIN_RADIUS = 0.05         # m, keeps the tangent defined if the hinge estimate lands on the tool

    def __init__(self):
        super().__init__()
        # --- approach ---
        # action units per metre of error: 0.1 m error -> full 0.1 m/s
        self.k_approach_xy = nn.Parameter(torch.tensor([10.0]))
        self.k_approach_z = nn.Parameter(torch.tensor([10.0]))
        # tool minus tag position when the bar sits between the fingers (m; previous fit to the demo)
        self.grasp_offset_x = nn.Parameter(torch.tensor([0.02]))
        self.grasp_offset_y = nn.Parameter(torch.tensor([-0.03]))
        self.grasp_offset_z = nn.Parameter(torch.tensor([-0.015]))
        # stay this far above the bar until lined up in x-y, then descend (m)
        self.hover_height = nn.Parameter(torch.tensor([0.10]))
        # x-y error under which the tool may descend (m)
        self.align_radius = nn.Parameter(torch.tensor([0.02]))
        # 3-D error under which the gripper is commanded to close (m)
        self.grasp_radius = nn.Parameter(torch.tensor([0.02]))
        # --- gripper state (opening: 1 open; 0.204 measured when closed on nothing) ---
        # opening below this -> fingers have closed (gate is exactly 0 at fully open)
        self.grip_hold_threshold = nn.Parameter(torch.tensor([0.95]))
        # opening below this -> closed on nothing (measured empty reading 0.204)
        self.grip_empty_threshold = nn.Parameter(torch.tensor([0.22]))
        # opening change per step below which the fingers have stopped (on the bar)
        self.grip_settle_rate = nn.Parameter(torch.tensor([0.004]))
        # tool within this height of the bar height counts as "at the bar" (m)
        self.engage_z_band = nn.Parameter(torch.tensor([0.02]))
        # --- pulling along the door arc ---
        # hinge minus target (m): door and target are fixed; closed handle seen at (0.52, -0.255),
        # hinge 0.4 m to its left -> (0.52, 0.145); target (0.277, 0.236)
        self.hinge_offset_x = nn.Parameter(torch.tensor([0.243]))
        self.hinge_offset_y = nn.Parameter(torch.tensor([-0.091]))
        # action units per metre of remaining y distance of the handle to the target
        self.k_pull = nn.Parameter(torch.tensor([10.0]))
        # cap on the pulling speed along the arc (action units; 0.6 -> 0.06 m/s)
        self.pull_speed_max = nn.Parameter(torch.tensor([0.6]))
        # holds the tool at bar height while pulling (action units per metre)
        self.k_hold_z = nn.Parameter(torch.tensor([5.0]))
        # --- noise: per axis and per phase (approach / pull), plus gripper ---
        self.log_std_app_dx = nn.Parameter(torch.tensor([math.log(0.15)]))
        self.log_std_app_dy = nn.Parameter(torch.tensor([math.log(0.15)]))
        self.log_std_app_dz = nn.Parameter(torch.tensor([math.log(0.15)]))
        self.log_std_pull_dx = nn.Parameter(torch.tensor([math.log(0.15)]))
        self.log_std_pull_dy = nn.Parameter(torch.tensor([math.log(0.15)]))
        self.log_std_pull_dz = nn.Parameter(torch.tensor([math.log(0.15)]))
        self.log_std_gripper = nn.Parameter(torch.tensor([math.log(0.05)]))

    def forward(self, features: torch.Tensor):
        f = torch.nan_to_num(features.float(), nan=0.0, posinf=0.0, neginf=0.0)
        f = torch.clamp(f, -10.0, 10.0)

        tool_x, tool_y, tool_z = f[:, 0], f[:, 1], f[:, 2]
        grip = f[:, 3]
        hx, hy, hz = f[:, 4], f[:, 5], f[:, 6]
        prev_grip = f[:, 21]
        tgt_x, tgt_y, tgt_z = f[:, 36], f[:, 37], f[:, 38]

        # ================= approach and grasp (uses the tag; door still closed) =================
        ex = hx + self.grasp_offset_x - tool_x
        ey = hy + self.grasp_offset_y - tool_y
        ez_grasp = hz + self.grasp_offset_z - tool_z
        dist_xy = torch.sqrt(ex * ex + ey * ey + self.EPS ** 2)
        align = _below(dist_xy, self.align_radius, self.ALIGN_WIDTH)
        ez_goal = ez_grasp + self.hover_height * (1.0 - align)
        dist_grasp = torch.sqrt(ex * ex + ey * ey + ez_grasp * ez_grasp + self.EPS ** 2)
        near = _below(dist_grasp, self.grasp_radius, self.GRASP_WIDTH)

        a_app_x = self.k_approach_xy * ex
        a_app_y = self.k_approach_xy * ey
        a_app_z = self.k_approach_z * ez_goal

        # ================= holding state (encoders + gripper + fixed target only) =================
        closed = _below(grip, self.grip_hold_threshold, self.HOLD_WIDTH)
        empty = _below(grip, self.grip_empty_threshold, self.EMPTY_WIDTH)
        # bar height = target height (vertical hinge), plus the grasp offset of the tool
        z_to_bar = tool_z - (tgt_z + self.grasp_offset_z)
        at_bar_height = _below(torch.abs(z_to_bar), self.engage_z_band, self.ZBAND_WIDTH)
        holding = closed * at_bar_height * (1.0 - empty)
        grip_rate = torch.abs(grip - prev_grip)
        settled = _below(grip_rate, self.grip_settle_rate, self.SETTLE_WIDTH)
        pulling = holding * settled

        # ================= pull along the arc about the fixed hinge =================
        hand_x = tool_x - self.grasp_offset_x
        hand_y = tool_y - self.grasp_offset_y
        hinge_x = tgt_x + self.hinge_offset_x
        hinge_y = tgt_y + self.hinge_offset_y
        rx = hand_x - hinge_x
        ry = hand_y - hinge_y
        rnorm = torch.clamp(torch.sqrt(rx * rx + ry * ry + self.EPS ** 2), min=self.MIN_RADIUS)
        # door turns clockwise seen from above: tangent = radial unit vector rotated by -90 deg
        tan_x = ry / rnorm
        tan_y = -rx / rnorm
        y_to_target = tgt_y - hand_y
        pull_speed = torch.minimum(torch.clamp(self.k_pull * y_to_target, min=0.0), self.pull_speed_max)
        a_pull_x = pull_speed * tan_x
        a_pull_y = pull_speed * tan_y
        a_pull_z = -self.k_hold_z * z_to_bar

        # ================= blend and clip =================
        dx = torch.clamp((1.0 - pulling) * a_app_x + pulling * a_pull_x, -1.0, 1.0)
        dy = torch.clamp((1.0 - pulling) * a_app_y + pulling * a_pull_y, -1.0, 1.0)
        dz = torch.clamp((1.0 - pulling) * a_app_z + pulling * a_pull_z, -1.0, 1.0)
        close_drive = torch.clamp(near + holding, 0.0, 1.0) * (1.0 - empty)
        gripper = torch.clamp(1.0 - close_drive, 0.0, 1.0)
        action_mean = torch.stack([dx, dy, dz, gripper], dim=-1)

        # ================= noise model =================
        ones = torch.ones_like(dx)
        std_dx = torch.exp(torch.clamp(self.log_std_app_dx, -7.0, 1.0)) * (1.0 - pulling) \
            + torch.exp(torch.clamp(self.log_std_pull_dx, -7.0, 1.0)) * pulling
        std_dy = torch.exp(torch.clamp(self.log_std_app_dy, -7.0, 1.0)) * (1.0 - pulling) \
            + torch.exp(torch.clamp(self.log_std_pull_dy, -7.0, 1.0)) * pulling
        std_dz = torch.exp(torch.clamp(self.log_std_app_dz, -7.0, 1.0)) * (1.0 - pulling) \
            + torch.exp(torch.clamp(self.log_std_pull_dz, -7.0, 1.0)) * pulling
        std_grip = torch.exp(torch.clamp(self.log_std_gripper, -7.0, 1.0)) * ones
        std = torch.stack([std_dx, std_dy, std_dz, std_grip], dim=-1)
        scale_tril = torch.diag_embed(std)

        # ================= logging =================
        door_angle = torch.atan2(ry, rx).detach()  # handle angle about hinge (rad): -pi/2 closed, towards -pi open
        info = {}
        for name, p in self.named_parameters():
            info['weight_' + name] = p
        latents = {
            'err_grasp_x': ex, 'err_grasp_y': ey, 'err_grasp_z': ez_grasp, 'err_goal_z': ez_goal,
            'dist_grasp_xy': dist_xy, 'dist_grasp_3d': dist_grasp,
            'gate_align': align, 'gate_near': near,
            'gate_closed': closed, 'gate_empty': empty, 'gate_at_bar_height': at_bar_height,
            'gate_holding': holding, 'gate_settled': settled, 'gate_pull': pulling,
            'z_to_bar': z_to_bar, 'grip_rate': grip_rate,
            'handle_est_x': hand_x, 'handle_est_y': hand_y,
            'hinge_x': hinge_x, 'hinge_y': hinge_y, 'radius_to_hinge': rnorm,
            'door_angle': door_angle,
            'tangent_x': tan_x, 'tangent_y': tan_y,
            'y_to_target': y_to_target, 'tag_y_to_target': tgt_y - hy,
            'pull_speed': pull_speed,
            'app_cmd_x': a_app_x, 'app_cmd_y': a_app_y, 'app_cmd_z': a_app_z,
            'pull_cmd_x': a_pull_x, 'pull_cmd_y': a_pull_y, 'pull_cmd_z': a_pull_z,
            'close_drive': close_drive,
        }
        for name, v in latents.items():
            info['latent_' + name] = v
        return action_mean, scale_tril, info
