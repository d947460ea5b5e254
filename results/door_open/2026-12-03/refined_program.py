# refine-structure: door_open
# refine-edit: door_hover_release
# Origin: the zero-shot starter, written independently from the generation prompt alone (task
# description, contract and generation rules); its text below is kept as written.
"""Zero-shot starter for door_open: approach, grasp and pull phases blended by distance.
The gripper servoes to a grasp point at the handle (hovering above it until aligned in
x-y), closes as it gets within a few centimetres (a smooth exp(-distance) closeness), and
the same closeness blends in a pull that moves the handle toward the target.  Gripper
command = open minus closing term; each action has a learnable log-std.
Revision (offline catalogue): the hover fades with the square of the horizontal misalignment,
so it is gone once the gripper is over the handle instead of holding it a few centimetres up.
"""
import math

import torch
import torch.nn as nn


class OpenDoorPolicy(nn.Module):
    # Inputs are clamped to this magnitude after nan_to_num (all positions are within ~1 m).
    INPUT_BOUND = 10.0
    # Small constant inside square roots so distances have finite gradients at zero (m^2).
    DIST_EPS = 1e-6
    # Floor (m) on the learnable radii so the fit cannot drive them to zero or below
    # (they divide distances inside exp).
    MIN_RADIUS = 0.005

    def __init__(self):
        super().__init__()
        # --- approach: where to put the gripper relative to the handle (m) ---
        # Grasp point = handle position + offset; the handle centre itself to start with.
        self.grasp_offset_x = nn.Parameter(torch.tensor([0.0]))
        self.grasp_offset_y = nn.Parameter(torch.tensor([0.0]))
        self.grasp_offset_z = nn.Parameter(torch.tensor([0.0]))
        # Hover height above the handle while not yet aligned in x-y (avoids hitting the door).
        self.hover_height = nn.Parameter(torch.tensor([0.10]))
        # x-y distance (m) over which the hover height fades out: descend once within ~3 cm.
        self.align_radius = nn.Parameter(torch.tensor([0.03]))
        # Position gains: action 1 = 1 cm/step, so 10 per metre saturates at a 10 cm error.
        self.k_approach_xy = nn.Parameter(torch.tensor([10.0]))
        self.k_approach_z = nn.Parameter(torch.tensor([10.0]))

        # --- grasp: closeness = exp(-distance to grasp point / grasp_radius) ---
        # About 0.37 at 2 cm, ~1 when the fingers surround the handle.
        self.grasp_radius = nn.Parameter(torch.tensor([0.02]))
        # Gripper command = open level - close gain * closeness (1 open, 0 closed).
        self.gripper_open_level = nn.Parameter(torch.tensor([1.0]))
        self.k_gripper_close = nn.Parameter(torch.tensor([1.0]))

        # --- pull: move the handle toward the target, gated by the grasp closeness ---
        # The handle travels ~0.2-0.3 m to the target; 10 per metre gives full speed until
        # the last 10 cm.
        self.k_pull = nn.Parameter(torch.tensor([10.0]))

        # --- log std per action (dx, dy, dz, gripper) ---
        self.log_std = nn.Parameter(
            torch.tensor([math.log(0.3), math.log(0.3), math.log(0.3), math.log(0.2)])
        )

    def _distance(self, vec):
        # Euclidean length along the last dimension with a smooth floor.
        return torch.sqrt((vec * vec).sum(dim=-1) + self.DIST_EPS)

    def forward(self, features):
        features = torch.clamp(torch.nan_to_num(features, nan=0.0), -self.INPUT_BOUND, self.INPUT_BOUND)

        gripper_pos = features[:, 0:3]
        gripper_opening = features[:, 3]
        handle_pos = features[:, 4:7]
        prev_handle_pos = features[:, 22:25]
        target_pos = features[:, 36:39]

        # Handle displacement in the last step (m/step): shows whether the door is moving.
        handle_step = self._distance(handle_pos - prev_handle_pos)

        # --- approach target ---
        grasp_offset = torch.cat([self.grasp_offset_x, self.grasp_offset_y, self.grasp_offset_z])
        grasp_point = handle_pos + grasp_offset.unsqueeze(0)
        to_grasp = grasp_point - gripper_pos
        grasp_dist_xy = self._distance(to_grasp[:, 0:2])
        grasp_dist = self._distance(to_grasp)

        # 0 when aligned over the handle in x-y, -> 1 when far: stay high until aligned.
        # Squared ratio: flat at zero, so the hover is released fully once aligned.
        align_ratio = grasp_dist_xy / torch.clamp(self.align_radius, min=self.MIN_RADIUS)
        misalignment = 1.0 - torch.exp(-align_ratio * align_ratio)
        approach_err_x = to_grasp[:, 0]
        approach_err_y = to_grasp[:, 1]
        approach_err_z = to_grasp[:, 2] + self.hover_height * misalignment

        # --- grasp closeness (smooth phase variable from distance) ---
        closeness = torch.exp(-grasp_dist / torch.clamp(self.grasp_radius, min=self.MIN_RADIUS))

        # --- pull: handle -> target, only in the horizontal plane (the hinge is vertical) ---
        handle_to_target = target_pos - handle_pos
        handle_target_dist = self._distance(handle_to_target)
        pull_x = closeness * self.k_pull * handle_to_target[:, 0]
        pull_y = closeness * self.k_pull * handle_to_target[:, 1]

        # --- motion: keep tracking the (moving) grasp point + pull once grasped ---
        dx_raw = self.k_approach_xy * approach_err_x + pull_x
        dy_raw = self.k_approach_xy * approach_err_y + pull_y
        dz_raw = self.k_approach_z * approach_err_z
        dx = torch.clamp(dx_raw, -1.0, 1.0)
        dy = torch.clamp(dy_raw, -1.0, 1.0)
        dz = torch.clamp(dz_raw, -1.0, 1.0)

        # --- gripper: open while approaching, close as the fingers reach the handle ---
        gripper_raw = self.gripper_open_level - self.k_gripper_close * closeness
        gripper_cmd = torch.clamp(gripper_raw, 0.0, 1.0)

        action_mean = torch.stack([dx, dy, dz, gripper_cmd], dim=1)

        std = torch.exp(self.log_std)
        std_batch = std.unsqueeze(0) * torch.ones_like(gripper_opening).unsqueeze(1)
        scale_tril = torch.diag_embed(std_batch)

        info = {
            "weight_grasp_offset_x": self.grasp_offset_x,
            "weight_grasp_offset_y": self.grasp_offset_y,
            "weight_grasp_offset_z": self.grasp_offset_z,
            "weight_hover_height": self.hover_height,
            "weight_align_radius": self.align_radius,
            "weight_k_approach_xy": self.k_approach_xy,
            "weight_k_approach_z": self.k_approach_z,
            "weight_grasp_radius": self.grasp_radius,
            "weight_gripper_open_level": self.gripper_open_level,
            "weight_k_gripper_close": self.k_gripper_close,
            "weight_k_pull": self.k_pull,
            "weight_log_std_dx": self.log_std[0:1],
            "weight_log_std_dy": self.log_std[1:2],
            "weight_log_std_dz": self.log_std[2:3],
            "weight_log_std_gripper": self.log_std[3:4],
            "latent_grasp_dist": grasp_dist,
            "latent_grasp_dist_xy": grasp_dist_xy,
            "latent_misalignment": misalignment,
            "latent_align_ratio": align_ratio,
            "latent_approach_err_x": approach_err_x,
            "latent_approach_err_y": approach_err_y,
            "latent_approach_err_z": approach_err_z,
            "latent_closeness": closeness,
            "latent_handle_target_dist": handle_target_dist,
            "latent_handle_to_target_x": handle_to_target[:, 0],
            "latent_handle_to_target_y": handle_to_target[:, 1],
            "latent_pull_x": pull_x,
            "latent_pull_y": pull_y,
            "latent_handle_step": handle_step,
            "latent_gripper_opening": gripper_opening,
            "latent_dx_raw": dx_raw,
            "latent_dy_raw": dy_raw,
            "latent_dz_raw": dz_raw,
            "latent_gripper_raw": gripper_raw,
        }
        return action_mean, scale_tril, info
