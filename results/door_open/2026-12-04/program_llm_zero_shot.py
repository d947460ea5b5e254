# refine-structure: door_open
# Origin: a deliberately simple user controller, written by hand by a refine_ros maintainer from
# the published task description alone, as a weak start for `refine run --start`. Not an LLM
# program. It reaches for the door's coordinates and, once close, pushes them toward the target
# without ever closing the gripper on the handle.
"""Reach-then-push door controller: no grasp, the gripper stays at one level."""
import math

import torch
import torch.nn as nn


class OpenDoorPolicy(nn.Module):
    # Inputs are clamped to this magnitude after nan_to_num (positions are within about 1 m).
    INPUT_BOUND = 10.0
    # Keeps the square root differentiable at zero distance (m^2).
    DIST_EPS = 1e-9

    def __init__(self):
        super().__init__()
        # About 1 cm of motion per action unit: 10 per metre saturates at 10 cm.
        self.k_reach = nn.Parameter(torch.tensor([10.0]))
        # Push gain along the door-to-target direction, applied once the gripper is near.
        self.k_push = nn.Parameter(torch.tensor([5.0]))
        # Distance (m) below which the gripper counts as near the door's coordinates.
        self.near_radius = nn.Parameter(torch.tensor([0.05]))
        # Gripper command held all episode (1 open, 0 closed).
        self.gripper_level = nn.Parameter(torch.tensor([1.0]))
        self.log_std = nn.Parameter(torch.tensor([math.log(0.3)] * 4))

    def forward(self, features):
        f = torch.clamp(torch.nan_to_num(features, nan=0.0, posinf=0.0, neginf=0.0),
                        -self.INPUT_BOUND, self.INPUT_BOUND)
        gripper = f[:, 0:3]
        door = f[:, 4:7]
        target = f[:, 36:39]
        reach = door - gripper
        distance = torch.sqrt((reach * reach).sum(dim=1) + self.DIST_EPS)
        # 1 when touching the door's coordinates, falling linearly to 0 at near_radius.
        nearness = torch.clamp(1.0 - distance / torch.clamp(self.near_radius, min=1e-3), 0.0, 1.0)
        push = target - door
        dx = torch.clamp(self.k_reach * reach[:, 0] + self.k_push * nearness * push[:, 0], -1.0, 1.0)
        dy = torch.clamp(self.k_reach * reach[:, 1] + self.k_push * nearness * push[:, 1], -1.0, 1.0)
        dz = torch.clamp(self.k_reach * reach[:, 2], -1.0, 1.0)
        grip = torch.clamp(self.gripper_level * torch.ones_like(dx), 0.0, 1.0)
        action_mean = torch.stack([dx, dy, dz, grip], dim=1)
        std = torch.exp(self.log_std).unsqueeze(0) * torch.ones_like(action_mean)
        scale_tril = torch.diag_embed(std)
        info = {
            "weight_k_reach": self.k_reach,
            "weight_k_push": self.k_push,
            "weight_near_radius": self.near_radius,
            "weight_gripper_level": self.gripper_level,
            "latent_distance": distance,
            "latent_nearness": nearness,
            "latent_push_x": push[:, 0],
            "latent_push_y": push[:, 1],
        }
        return action_mean, scale_tril, info
