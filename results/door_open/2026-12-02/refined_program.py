# refine-structure: door_open
# refine-edit: door_approach_above
"""Door-opening policy built from named geometric quantities (offline catalogue structure).

The gripper moves toward the door handle with a proportional gain per axis.
It first hovers above the grasp point and only descends once aligned with it in the
horizontal plane, so it does not sweep into the door on the way.
The gripper command is a constant.
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
        # 1 keeps the gripper open.
        self.grip = nn.Parameter(torch.tensor(1.0))
        # Height above the grasp point while not yet aligned in the horizontal plane.
        self.hover_height = nn.Parameter(torch.tensor(0.15))
        self.align_radius = nn.Parameter(torch.tensor(0.1))
        self.align_sharpness = nn.Parameter(torch.tensor(50.0))
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
        align_distance = torch.sqrt(
            (goal_x - gripper_x) ** 2 + (goal_y - gripper_y) ** 2 + self.eps
        )
        hovering = torch.sigmoid(self.align_sharpness * (align_distance - self.align_radius))
        goal_z = goal_z + self.hover_height * hovering
        dx = goal_x - gripper_x
        dy = goal_y - gripper_y
        dz = goal_z - gripper_z
        reach_distance = torch.sqrt(dx**2 + dy**2 + dz**2 + self.eps)
        move_x = self.k_x * dx
        move_y = self.k_y * dy
        move_z = self.k_z * dz
        grip = self.grip * torch.ones_like(gripper_x)
        mean = torch.stack([move_x, move_y, move_z, grip], dim=-1)
        scale_tril = torch.diag_embed(torch.exp(self.log_std).expand_as(mean))
        info = {
            "weight_k_x": self.k_x.reshape(1),
            "weight_k_y": self.k_y.reshape(1),
            "weight_k_z": self.k_z.reshape(1),
            "weight_grip": self.grip.reshape(1),
            "weight_hover_height": self.hover_height.reshape(1),
            "weight_align_radius": self.align_radius.reshape(1),
            "latent_dx": dx,
            "latent_dy": dy,
            "latent_dz": dz,
            "latent_reach_distance": reach_distance,
            "latent_align_distance": align_distance,
            "latent_hovering": hovering,
        }
        return mean, scale_tril, info
