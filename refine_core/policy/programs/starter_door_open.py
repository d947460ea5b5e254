# refine-structure: door_open
"""Door-opening policy built from named geometric quantities (offline catalogue structure).

The gripper moves toward the door handle with a proportional gain per axis.
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
            "latent_dx": dx,
            "latent_dy": dy,
            "latent_dz": dz,
            "latent_reach_distance": reach_distance,
        }
        return mean, scale_tril, info
