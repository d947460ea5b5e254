import math
import torch
import torch.nn as nn

# ---- feature layout (given by the task) ----
IDX_TOOL_X, IDX_TOOL_Y, IDX_TOOL_Z = 0, 1, 2          # tool position from joint encoders [m]
IDX_GRIP = 3                                          # finger opening (logged only; not a contact signal:
                                                      # fingers shut on nothing read ~0.20, on the bar ~0.2-0.28)
IDX_HANDLE_X, IDX_HANDLE_Y, IDX_HANDLE_Z = 4, 5, 6    # handle tag position [m] (may repeat / be stale)
IDX_TARGET_X, IDX_TARGET_Y = 36, 37                   # desired handle position when door open [m]

# ---- numerical module constants ----
EPS_SQ = 1e-9            # keeps square roots differentiable at zero [m^2]
MIN_RAMP_WIDTH = 1e-3    # smallest allowed ramp width, so a ramp cannot collapse to a step
TAG_VALID_NORM = 0.01    # [m] tag reading with norm below this counts as "no reading" (all zeros)


def _ramp_down(value, center, width):
    """1 for value <= center - width/2, 0 for value >= center + width/2, linear between."""
    w = torch.clamp(torch.abs(width), min=MIN_RAMP_WIDTH)
    return torch.clamp(0.5 - (value - center) / w, 0.0, 1.0)


class OpenDoorPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        # Gripper command level: the demonstration closes the fingers at once and hooks the bar.
        self.grip_level = nn.Parameter(torch.tensor([0.05]))

        # Hook point relative to the tag [m]: closed fingers sit ~5 cm behind the tag (towards the
        # door), a few cm to its +y side, at bar height (previous fit: 0.054, 0.043, -0.017).
        self.hook_offset_x = nn.Parameter(torch.tensor([0.054]))
        self.hook_offset_y = nn.Parameter(torch.tensor([0.043]))
        self.hook_offset_z = nn.Parameter(torch.tensor([-0.017]))

        # Approach P-gains [action units per metre] (expert looks like P-control with gain ~10-12).
        self.gain_xy = nn.Parameter(torch.tensor([12.0]))
        self.gain_z = nn.Parameter(torch.tensor([8.0]))

        # Funnel: height above the hook point per metre of xy distance [m/m], capped [m].
        self.funnel_slope = nn.Parameter(torch.tensor([0.7]))
        self.funnel_cap = nn.Parameter(torch.tensor([0.14]))

        # Engagement geometry: tool within ~8-12 cm of the tag in xy (hook point is ~7 cm away)
        # and within ~2-4 cm of bar height [m].
        self.reach_center = nn.Parameter(torch.tensor([0.10]))
        self.reach_width = nn.Parameter(torch.tensor([0.04]))
        self.height_center = nn.Parameter(torch.tensor([0.03]))
        self.height_width = nn.Parameter(torch.tensor([0.02]))

        # Hinge relative to the (fixed) target [m]: closed handle (0.522, -0.255) + 0.4 m along +y
        # = (0.522, 0.145), minus target (0.277, 0.236).
        self.hinge_offset_x = nn.Parameter(torch.tensor([0.245]))
        self.hinge_offset_y = nn.Parameter(torch.tensor([-0.091]))

        # Pull: tangential speed [fraction of 0.1 m/s], radial term (+ = away from hinge) [action
        # units], bar-height hold gain [action units per metre], y distance of the slow-down [m].
        self.pull_speed = nn.Parameter(torch.tensor([0.6]))
        self.pull_radial = nn.Parameter(torch.tensor([0.0]))
        self.pull_gain_z = nn.Parameter(torch.tensor([5.0]))
        self.slow_dist = nn.Parameter(torch.tensor([0.04]))

        # Log standard deviations per action (dx, dy, dz, gripper) in approach and pull.
        self.log_std_approach = nn.Parameter(torch.log(torch.tensor([0.15, 0.15, 0.10, 0.05])))
        self.log_std_pull = nn.Parameter(torch.log(torch.tensor([0.30, 0.30, 0.20, 0.05])))

    def forward(self, features):
        feats = torch.nan_to_num(features, nan=0.0, posinf=0.0, neginf=0.0)

        tool_x = feats[:, IDX_TOOL_X]
        tool_y = feats[:, IDX_TOOL_Y]
        tool_z = feats[:, IDX_TOOL_Z]
        tag_x = feats[:, IDX_HANDLE_X]
        tag_y = feats[:, IDX_HANDLE_Y]
        tag_z = feats[:, IDX_HANDLE_Z]
        goal_x = feats[:, IDX_TARGET_X]
        goal_y = feats[:, IDX_TARGET_Y]

        # Tag validity (all-zero reading = no sighting -> handle assumed at the hooked tool).
        tag_norm = torch.sqrt(tag_x * tag_x + tag_y * tag_y + tag_z * tag_z + EPS_SQ)
        tag_seen = torch.clamp(tag_norm / TAG_VALID_NORM, 0.0, 1.0)
        hand_x = tag_seen * tag_x + (1.0 - tag_seen) * (tool_x - self.hook_offset_x)
        hand_y = tag_seen * tag_y + (1.0 - tag_seen) * (tool_y - self.hook_offset_y)
        hand_z = tag_seen * tag_z + (1.0 - tag_seen) * (tool_z - self.hook_offset_z)

        # ---- approach: P-control to the hook point through a height funnel ----
        err_x = hand_x + self.hook_offset_x - tool_x
        err_y = hand_y + self.hook_offset_y - tool_y
        err_z = hand_z + self.hook_offset_z - tool_z          # bar height - tool height
        dist_xy_hook = torch.sqrt(err_x * err_x + err_y * err_y + EPS_SQ)
        lift = torch.clamp(torch.minimum(self.funnel_slope * dist_xy_hook, self.funnel_cap), min=0.0)
        app_dx = self.gain_xy * err_x
        app_dy = self.gain_xy * err_y
        app_dz = self.gain_z * (err_z + lift)

        # ---- engagement: geometry only (tool beside the handle at bar height) ----
        rel_x = tool_x - hand_x
        rel_y = tool_y - hand_y
        tool_tag_xy = torch.sqrt(rel_x * rel_x + rel_y * rel_y + EPS_SQ)   # rotation-invariant
        within_reach = _ramp_down(tool_tag_xy, self.reach_center, self.reach_width)
        height_gap = torch.sqrt(err_z * err_z + EPS_SQ)
        at_bar_height = _ramp_down(height_gap, self.height_center, self.height_width)
        engaged = within_reach * at_bar_height

        # ---- pull: tangent of the circle about a hinge fixed relative to the target ----
        hinge_x = goal_x + self.hinge_offset_x
        hinge_y = goal_y + self.hinge_offset_y
        rad_x = tool_x - hinge_x
        rad_y = tool_y - hinge_y
        rad_len = torch.sqrt(rad_x * rad_x + rad_y * rad_y + EPS_SQ)
        rad_ux = rad_x / rad_len
        rad_uy = rad_y / rad_len
        tan_x = rad_uy          # door closed (tool at -y of hinge) -> (-1, 0): towards the arm
        tan_y = -rad_ux         # turns towards +y as the door opens

        y_err = goal_y - hand_y                                   # success: within 0.08 m
        slow_width = torch.clamp(torch.abs(self.slow_dist), min=MIN_RAMP_WIDTH)
        speed_factor = torch.clamp(y_err / slow_width, 0.0, 1.0)
        pull_dx = self.pull_speed * speed_factor * tan_x + self.pull_radial * rad_ux
        pull_dy = self.pull_speed * speed_factor * tan_y + self.pull_radial * rad_uy
        pull_dz = self.pull_gain_z * err_z                        # hold bar height

        # ---- blend phases, clamp each action mean to its bounds ----
        act_dx = torch.clamp((1.0 - engaged) * app_dx + engaged * pull_dx, -1.0, 1.0)
        act_dy = torch.clamp((1.0 - engaged) * app_dy + engaged * pull_dy, -1.0, 1.0)
        act_dz = torch.clamp((1.0 - engaged) * app_dz + engaged * pull_dz, -1.0, 1.0)
        act_grip = torch.clamp(self.grip_level * torch.ones_like(tool_x), 0.0, 1.0)
        action_mean = torch.stack([act_dx, act_dy, act_dz, act_grip], dim=1)

        # ---- per-action noise blended by phase ----
        gate_col = engaged.unsqueeze(1)
        std = torch.exp(self.log_std_approach).unsqueeze(0) * (1.0 - gate_col) \
            + torch.exp(self.log_std_pull).unsqueeze(0) * gate_col
        scale_tril = torch.diag_embed(std)

        info = {
            'weight_grip_level': self.grip_level,
            'weight_hook_offset_x': self.hook_offset_x,
            'weight_hook_offset_y': self.hook_offset_y,
            'weight_hook_offset_z': self.hook_offset_z,
            'weight_gain_xy': self.gain_xy,
            'weight_gain_z': self.gain_z,
            'weight_funnel_slope': self.funnel_slope,
            'weight_funnel_cap': self.funnel_cap,
            'weight_reach_center': self.reach_center,
            'weight_reach_width': self.reach_width,
            'weight_height_center': self.height_center,
            'weight_height_width': self.height_width,
            'weight_hinge_offset_x': self.hinge_offset_x,
            'weight_hinge_offset_y': self.hinge_offset_y,
            'weight_pull_speed': self.pull_speed,
            'weight_pull_radial': self.pull_radial,
            'weight_pull_gain_z': self.pull_gain_z,
            'weight_slow_dist': self.slow_dist,
            'weight_std_approach_dx': torch.exp(self.log_std_approach[0:1]),
            'weight_std_approach_dy': torch.exp(self.log_std_approach[1:2]),
            'weight_std_approach_dz': torch.exp(self.log_std_approach[2:3]),
            'weight_std_approach_grip': torch.exp(self.log_std_approach[3:4]),
            'weight_std_pull_dx': torch.exp(self.log_std_pull[0:1]),
            'weight_std_pull_dy': torch.exp(self.log_std_pull[1:2]),
            'weight_std_pull_dz': torch.exp(self.log_std_pull[2:3]),
            'weight_std_pull_grip': torch.exp(self.log_std_pull[3:4]),
            'latent_tag_seen': tag_seen,
            'latent_hook_err_x': err_x,
            'latent_hook_err_y': err_y,
            'latent_hook_err_z': err_z,
            'latent_dist_xy_hook': dist_xy_hook,
            'latent_funnel_lift': lift,
            'latent_tool_tag_xy': tool_tag_xy,
            'latent_within_reach': within_reach,
            'latent_at_bar_height': at_bar_height,
            'latent_engaged': engaged,
            'latent_hinge_x': hinge_x,
            'latent_hinge_y': hinge_y,
            'latent_hinge_radius': rad_len,
            'latent_radial_x': rad_ux,
            'latent_radial_y': rad_uy,
            'latent_tangent_x': tan_x,
            'latent_tangent_y': tan_y,
            'latent_target_err_y': y_err,
            'latent_speed_factor': speed_factor,
            'latent_approach_dx': app_dx,
            'latent_approach_dy': app_dy,
            'latent_approach_dz': app_dz,
            'latent_pull_dx': pull_dx,
            'latent_pull_dy': pull_dy,
            'latent_pull_dz': pull_dz,
        }
        return action_mean, scale_tril, info
