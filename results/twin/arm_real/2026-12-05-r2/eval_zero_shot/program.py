import math
import torch
import torch.nn as nn

# ---- feature layout (given by the task) ----
IDX_TOOL_X, IDX_TOOL_Y, IDX_TOOL_Z = 0, 1, 2          # tool position from joint encoders [m]
IDX_GRIP = 3                                          # finger opening: 1 open, 0 closed
IDX_HANDLE_X, IDX_HANDLE_Y, IDX_HANDLE_Z = 4, 5, 6    # handle tag position [m] (may be stale)
IDX_TARGET_X, IDX_TARGET_Y, IDX_TARGET_Z = 36, 37, 38 # desired handle position when door open [m]

# ---- numerical / geometric module constants ----
EPS_SQ = 1e-9            # keeps square roots differentiable at zero [m^2]
CHORD_EPS_SQ = 1e-6      # regularises the chord length near the target [m^2]
MIN_RAMP_WIDTH = 1e-3    # smallest allowed width of a threshold ramp (keeps ramps well defined)
TAG_VALID_NORM = 0.01    # [m] a tag reading with norm below this is treated as "no reading" (all zeros)


def _ramp_down(value, lo, hi):
    """1 when value <= lo, 0 when value >= hi, linear in between (clamp, no sigmoid)."""
    width = torch.clamp(hi - lo, min=MIN_RAMP_WIDTH)
    return torch.clamp((hi - value) / width, 0.0, 1.0)


class OpenDoorPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        # Grasp point relative to the tag-tracked handle position [m]; start at the tag itself.
        self.grasp_offset_x = nn.Parameter(torch.tensor([0.0]))
        self.grasp_offset_y = nn.Parameter(torch.tensor([0.0]))
        self.grasp_offset_z = nn.Parameter(torch.tensor([0.0]))

        # Approach P-gains [action units per metre]: 12/m -> 1 cm error gives 1.2 cm/s,
        # about 8 cm error saturates at the 0.1 m/s speed limit (time constant ~0.8 s).
        self.gain_xy = nn.Parameter(torch.tensor([12.0]))
        self.gain_z = nn.Parameter(torch.tensor([12.0]))

        # Pre-grasp hover height above the grasp point while xy is not yet aligned [m].
        self.hover_height = nn.Parameter(torch.tensor([0.06]))
        # xy misalignment at which descent is fully allowed / fully blocked [m].
        self.align_near = nn.Parameter(torch.tensor([0.015]))
        self.align_far = nn.Parameter(torch.tensor([0.04]))

        # 3-D tool-to-grasp-point distance at which the gripper fully / starts to close [m].
        self.close_near = nn.Parameter(torch.tensor([0.015]))
        self.close_far = nn.Parameter(torch.tensor([0.03]))

        # Finger-opening reading band that means "closed on the handle": below held_lo fully
        # held, above held_hi (nearly open) not held.
        self.held_lo = nn.Parameter(torch.tensor([0.6]))
        self.held_hi = nn.Parameter(torch.tensor([0.9]))

        # Door geometry: handle-to-hinge radius stated by the task [m].
        self.door_radius = nn.Parameter(torch.tensor([0.4]))

        # Pull phase: tangential speed (fraction of 0.1 m/s -> 0.8 = 8 cm/s, arc of a
        # 90 deg opening ~0.63 m takes ~8 s), outward radial tension (none at start),
        # vertical drift correction (none at start) [action units].
        self.pull_speed = nn.Parameter(torch.tensor([0.8]))
        self.pull_radial = nn.Parameter(torch.tensor([0.0]))
        self.pull_dz = nn.Parameter(torch.tensor([0.0]))
        # Distance to the target within which the pull slows down linearly [m].
        self.slow_dist = nn.Parameter(torch.tensor([0.04]))

        # Log standard deviations per action (dx, dy, dz, gripper), approach and pull phase.
        self.log_std_approach = nn.Parameter(torch.log(torch.tensor([0.1, 0.1, 0.1, 0.1])))
        self.log_std_pull = nn.Parameter(torch.log(torch.tensor([0.1, 0.1, 0.1, 0.1])))

    def forward(self, features):
        feats = torch.nan_to_num(features, nan=0.0, posinf=0.0, neginf=0.0)

        tool_x = feats[:, IDX_TOOL_X]
        tool_y = feats[:, IDX_TOOL_Y]
        tool_z = feats[:, IDX_TOOL_Z]
        grip_open = feats[:, IDX_GRIP]
        tag_x = feats[:, IDX_HANDLE_X]
        tag_y = feats[:, IDX_HANDLE_Y]
        tag_z = feats[:, IDX_HANDLE_Z]
        goal_x = feats[:, IDX_TARGET_X]
        goal_y = feats[:, IDX_TARGET_Y]

        # Handle position implied by the tool if the tool sits at the grasp point.
        tool_handle_x = tool_x - self.grasp_offset_x
        tool_handle_y = tool_y - self.grasp_offset_y
        tool_handle_z = tool_z - self.grasp_offset_z

        # Tag validity: an all-zero reading means no sighting; fall back to "handle at the tool"
        # (the arm then holds still instead of driving to the origin).
        tag_norm = torch.sqrt(tag_x * tag_x + tag_y * tag_y + tag_z * tag_z + EPS_SQ)
        tag_seen = torch.clamp(tag_norm / TAG_VALID_NORM, 0.0, 1.0)
        obs_handle_x = tag_seen * tag_x + (1.0 - tag_seen) * tool_handle_x
        obs_handle_y = tag_seen * tag_y + (1.0 - tag_seen) * tool_handle_y
        obs_handle_z = tag_seen * tag_z + (1.0 - tag_seen) * tool_handle_z

        # ---- grasp latch: fingers partly closed means they closed on the handle ----
        held = _ramp_down(grip_open, self.held_lo, self.held_hi)

        # ---- approach phase: P-control to the grasp point, hovering until xy aligned ----
        err_x = obs_handle_x + self.grasp_offset_x - tool_x
        err_y = obs_handle_y + self.grasp_offset_y - tool_y
        err_z_grasp = obs_handle_z + self.grasp_offset_z - tool_z
        dist_xy = torch.sqrt(err_x * err_x + err_y * err_y + EPS_SQ)
        aligned = _ramp_down(dist_xy, self.align_near, self.align_far)
        err_z = err_z_grasp + self.hover_height * (1.0 - aligned)
        dist_grasp = torch.sqrt(err_x * err_x + err_y * err_y + err_z_grasp * err_z_grasp + EPS_SQ)
        near = _ramp_down(dist_grasp, self.close_near, self.close_far)

        app_dx = self.gain_xy * err_x
        app_dy = self.gain_xy * err_y
        app_dz = self.gain_z * err_z

        # ---- pull phase: follow the hinge circle through the handle and the target ----
        # Current handle estimate: the tool once held (tag may be hidden/stale), else the tag.
        hand_x = held * tool_handle_x + (1.0 - held) * obs_handle_x
        hand_y = held * tool_handle_y + (1.0 - held) * obs_handle_y

        chord_x = goal_x - hand_x
        chord_y = goal_y - hand_y
        chord_len = torch.sqrt(chord_x * chord_x + chord_y * chord_y + CHORD_EPS_SQ)
        chord_ux = chord_x / chord_len
        chord_uy = chord_y / chord_len
        half_chord = 0.5 * chord_len
        radius = self.door_radius
        # distance from chord midpoint to the hinge (circle centre), Pythagoras
        mid_to_hinge = torch.sqrt(torch.clamp(radius * radius - half_chord * half_chord, min=CHORD_EPS_SQ))
        # hinge lies on the +y side of the handle: rotate chord direction clockwise
        hinge_x = hand_x + 0.5 * chord_x + mid_to_hinge * chord_uy
        hinge_y = hand_y + 0.5 * chord_y - mid_to_hinge * chord_ux

        rad_x = hand_x - hinge_x
        rad_y = hand_y - hinge_y
        rad_len = torch.sqrt(rad_x * rad_x + rad_y * rad_y + EPS_SQ)
        rad_ux = rad_x / rad_len
        rad_uy = rad_y / rad_len
        # tangent of the opening motion: door closed -> (-1, 0); turns towards +y as it opens
        tan_x = rad_uy
        tan_y = -rad_ux

        slow_width = torch.clamp(self.slow_dist, min=MIN_RAMP_WIDTH)
        speed_factor = torch.clamp(chord_len / slow_width, 0.0, 1.0)
        pull_dx = self.pull_speed * speed_factor * tan_x + self.pull_radial * rad_ux
        pull_dy = self.pull_speed * speed_factor * tan_y + self.pull_radial * rad_uy
        pull_dz = self.pull_dz * torch.ones_like(tool_z)

        # ---- blend phases and clamp each action mean to its bounds ----
        act_dx = torch.clamp((1.0 - held) * app_dx + held * pull_dx, -1.0, 1.0)
        act_dy = torch.clamp((1.0 - held) * app_dy + held * pull_dy, -1.0, 1.0)
        act_dz = torch.clamp((1.0 - held) * app_dz + held * pull_dz, -1.0, 1.0)
        close_cmd = torch.maximum(near, held)
        act_grip = torch.clamp(1.0 - close_cmd, 0.0, 1.0)
        action_mean = torch.stack([act_dx, act_dy, act_dz, act_grip], dim=1)

        # ---- per-action noise, blended by phase ----
        held_col = held.unsqueeze(1)
        std = torch.exp(self.log_std_approach).unsqueeze(0) * (1.0 - held_col) \
            + torch.exp(self.log_std_pull).unsqueeze(0) * held_col
        scale_tril = torch.diag_embed(std)

        info = {
            'weight_grasp_offset_x': self.grasp_offset_x,
            'weight_grasp_offset_y': self.grasp_offset_y,
            'weight_grasp_offset_z': self.grasp_offset_z,
            'weight_gain_xy': self.gain_xy,
            'weight_gain_z': self.gain_z,
            'weight_hover_height': self.hover_height,
            'weight_align_near': self.align_near,
            'weight_align_far': self.align_far,
            'weight_close_near': self.close_near,
            'weight_close_far': self.close_far,
            'weight_held_lo': self.held_lo,
            'weight_held_hi': self.held_hi,
            'weight_door_radius': self.door_radius,
            'weight_pull_speed': self.pull_speed,
            'weight_pull_radial': self.pull_radial,
            'weight_pull_dz': self.pull_dz,
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
            'latent_grasp_err_x': err_x,
            'latent_grasp_err_y': err_y,
            'latent_grasp_err_z': err_z_grasp,
            'latent_approach_err_z': err_z,
            'latent_dist_xy': dist_xy,
            'latent_dist_grasp': dist_grasp,
            'latent_aligned': aligned,
            'latent_near': near,
            'latent_held': held,
            'latent_handle_est_x': hand_x,
            'latent_handle_est_y': hand_y,
            'latent_hinge_x': hinge_x,
            'latent_hinge_y': hinge_y,
            'latent_tangent_x': tan_x,
            'latent_tangent_y': tan_y,
            'latent_dist_to_target': chord_len,
            'latent_target_err_y': goal_y - hand_y,
            'latent_speed_factor': speed_factor,
            'latent_approach_dx': app_dx,
            'latent_approach_dy': app_dy,
            'latent_approach_dz': app_dz,
            'latent_pull_dx': pull_dx,
            'latent_pull_dy': pull_dy,
        }
        return action_mean, scale_tril, info
