# refine-structure: door_open
# Origin: a deliberately simple user controller, written by hand by a refine_ros maintainer from
# the published task description alone, as a weak start for `refine run --start`. Not an LLM
# program. It moves the gripper straight at the door's coordinates (features 4-6) and holds one
# gripper level; it has no grasp and no pull, so on its own it cannot open the door.
"""Reach-only door controller: a proportional move of the gripper toward the door's coordinates."""
import math

import torch
import torch.nn as nn


class OpenDoorPolicy(nn.Module):
    # Inputs are clamped to this magnitude after nan_to_num (positions are within about 1 m).
    INPUT_BOUND = 10.0

    def __init__(self):
        super().__init__()
        # One action unit is about 1 cm of motion per step: a gain of 10 per metre saturates
        # at a 10 cm error.
        self.k_reach = nn.Parameter(torch.tensor([10.0]))
        # Gripper command held all episode (1 open, 0 closed): start open.
        self.gripper_level = nn.Parameter(torch.tensor([1.0]))
        # Standard deviation per action (dx, dy, dz, gripper).
        self.log_std = nn.Parameter(torch.tensor([math.log(0.3)] * 3 + [math.log(0.3)]))

    def forward(self, features):
        f = torch.clamp(torch.nan_to_num(features, nan=0.0, posinf=0.0, neginf=0.0),
                        -self.INPUT_BOUND, self.INPUT_BOUND)
        gripper = f[:, 0:3]
        door = f[:, 4:7]
        error = door - gripper  # metres from the gripper to the door's coordinates
        dx = torch.clamp(self.k_reach * error[:, 0], -1.0, 1.0)
        dy = torch.clamp(self.k_reach * error[:, 1], -1.0, 1.0)
        dz = torch.clamp(self.k_reach * error[:, 2], -1.0, 1.0)
        grip = torch.clamp(self.gripper_level * torch.ones_like(dx), 0.0, 1.0)
        action_mean = torch.stack([dx, dy, dz, grip], dim=1)
        std = torch.exp(self.log_std).unsqueeze(0) * torch.ones_like(action_mean)
        scale_tril = torch.diag_embed(std)
        info = {
            "weight_k_reach": self.k_reach,
            "weight_gripper_level": self.gripper_level,
            "latent_error_x": error[:, 0],
            "latent_error_y": error[:, 1],
            "latent_error_z": error[:, 2],
            "latent_distance": torch.sqrt((error * error).sum(dim=1) + 1e-9),
        }
        return action_mean, scale_tril, info
