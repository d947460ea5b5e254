# refine-structure: door_open
"""Door-opening policy built from named geometric quantities (offline catalogue structure).

# >>> not door_pull_phase
The gripper moves toward the door handle with a proportional gain per axis.
# <<< not door_pull_phase
# >>> door_pull_phase
The gripper moves toward a grasp point beside the handle; once it is there (a smooth gate on
the gripper-to-grasp-point distance) it also drags the handle the way it has to go, toward the
target, while still tracking the grasp point.
# <<< door_pull_phase
# >>> door_approach_above
It first hovers above the grasp point and only descends once aligned with it in the
horizontal plane, so it does not sweep into the door on the way.
# <<< door_approach_above
# >>> not door_grip
The gripper command is a constant.
# <<< not door_grip
# >>> door_grip
The gripper opens while far from the handle and closes once engaged.
# <<< door_grip
"""

import torch
from torch import nn


class OpenDoorPolicy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # Motion command per unit of offset to the goal point (Meta-World's scripted policies
        # use gains of tens per metre).
        self.k_x = nn.Parameter(torch.tensor(10.0))
        self.k_y = nn.Parameter(torch.tensor(10.0))
        self.k_z = nn.Parameter(torch.tensor(10.0))
        # >>> not door_grip
        # 1 keeps the gripper open.
        self.grip = nn.Parameter(torch.tensor(1.0))
        # <<< not door_grip
        # >>> door_pull_phase
        # Grasp point relative to the handle (metres): on the handle's front edge.
        self.grasp_dx = nn.Parameter(torch.tensor(0.02))
        self.grasp_dy = nn.Parameter(torch.tensor(0.0))
        # Engaged when the gripper is within about grasp_radius of the grasp point.
        self.grasp_radius = nn.Parameter(torch.tensor(0.05))
        self.grasp_sharpness = nn.Parameter(torch.tensor(50.0))
        # While engaged, an extra motion that drags the handle: a constant push plus a gain
        # per metre the handle still has to travel toward the target.
        self.k_pull = nn.Parameter(torch.tensor(5.0))
        self.push_x = nn.Parameter(torch.tensor(0.0))
        self.push_y = nn.Parameter(torch.tensor(0.0))
        self.push_z = nn.Parameter(torch.tensor(0.0))
        # <<< door_pull_phase
        # >>> door_approach_above
        # Height above the grasp point while not yet aligned in the horizontal plane.
        self.hover_height = nn.Parameter(torch.tensor(0.15))
        self.align_radius = nn.Parameter(torch.tensor(0.1))
        self.align_sharpness = nn.Parameter(torch.tensor(50.0))
        # <<< door_approach_above
        # >>> door_grip
        # Gripper command: open (1) far from the grasp point, closed (0) once engaged.
        self.grip_open = nn.Parameter(torch.tensor(1.0))
        self.grip_engaged = nn.Parameter(torch.tensor(0.0))
        # <<< door_grip
        self.log_std = nn.Parameter(torch.full((4,), -1.0))
        # Keeps square roots differentiable at zero distance.
        self.eps = 1e-8

    def forward(self, features):
        f = torch.nan_to_num(features)
        gripper_x = f[:, 0]
        gripper_y = f[:, 1]
        gripper_z = f[:, 2]
        handle_x = f[:, 4]
        handle_y = f[:, 5]
        handle_z = f[:, 6]
        goal_x = handle_x
        goal_y = handle_y
        goal_z = handle_z
        # >>> door_pull_phase
        goal_x = goal_x + self.grasp_dx
        goal_y = goal_y + self.grasp_dy
        # <<< door_pull_phase
        # >>> door_approach_above
        align_distance = torch.sqrt(
            (goal_x - gripper_x) ** 2 + (goal_y - gripper_y) ** 2 + self.eps
        )
        hovering = torch.sigmoid(self.align_sharpness * (align_distance - self.align_radius))
        goal_z = goal_z + self.hover_height * hovering
        # <<< door_approach_above
        dx = goal_x - gripper_x
        dy = goal_y - gripper_y
        dz = goal_z - gripper_z
        reach_distance = torch.sqrt(dx**2 + dy**2 + dz**2 + self.eps)
        move_x = self.k_x * dx
        move_y = self.k_y * dy
        move_z = self.k_z * dz
        # >>> door_pull_phase
        target_x = f[:, 36]
        target_y = f[:, 37]
        target_z = f[:, 38]
        engaged = torch.sigmoid(self.grasp_sharpness * (self.grasp_radius - reach_distance))
        move_x = move_x + engaged * (self.push_x + self.k_pull * (target_x - handle_x))
        move_y = move_y + engaged * (self.push_y + self.k_pull * (target_y - handle_y))
        move_z = move_z + engaged * (self.push_z + self.k_pull * (target_z - handle_z))
        # <<< door_pull_phase
        # >>> not door_grip
        grip = self.grip * torch.ones_like(gripper_x)
        # <<< not door_grip
        # >>> door_grip
        grip = (1 - engaged) * self.grip_open + engaged * self.grip_engaged
        # <<< door_grip
        mean = torch.stack([move_x, move_y, move_z, grip], dim=-1)
        scale_tril = torch.diag_embed(torch.exp(self.log_std).expand_as(mean))
        info = {
            "weight_k_x": self.k_x.reshape(1),
            "weight_k_y": self.k_y.reshape(1),
            "weight_k_z": self.k_z.reshape(1),
            # >>> not door_grip
            "weight_grip": self.grip.reshape(1),
            # <<< not door_grip
            # >>> door_pull_phase
            "weight_grasp_dx": self.grasp_dx.reshape(1),
            "weight_grasp_dy": self.grasp_dy.reshape(1),
            "weight_grasp_radius": self.grasp_radius.reshape(1),
            "weight_k_pull": self.k_pull.reshape(1),
            "weight_push_x": self.push_x.reshape(1),
            "weight_push_y": self.push_y.reshape(1),
            "weight_push_z": self.push_z.reshape(1),
            # <<< door_pull_phase
            # >>> door_approach_above
            "weight_hover_height": self.hover_height.reshape(1),
            "weight_align_radius": self.align_radius.reshape(1),
            # <<< door_approach_above
            # >>> door_grip
            "weight_grip_open": self.grip_open.reshape(1),
            "weight_grip_engaged": self.grip_engaged.reshape(1),
            # <<< door_grip
            "latent_dx": dx,
            "latent_dy": dy,
            "latent_dz": dz,
            "latent_reach_distance": reach_distance,
            # >>> door_pull_phase
            "latent_engaged": engaged,
            # <<< door_pull_phase
            # >>> door_approach_above
            "latent_align_distance": align_distance,
            "latent_hovering": hovering,
            # <<< door_approach_above
        }
        return mean, scale_tril, info
