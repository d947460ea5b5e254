"""A 12-parameter door program: each motion axis is gain * (handle - gripper) + bias; the
gripper command is a bias. Gains start small and positive so a fit must find their signs."""

import torch
from torch import nn

INITIAL_GAIN = 0.1
INITIAL_LOG_STD = 0.0


class OpenDoorPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.full((3,), INITIAL_GAIN))
        self.bias = nn.Parameter(torch.zeros(4))
        self.log_std = nn.Parameter(torch.full((4,), INITIAL_LOG_STD))
        self.grip_unused = nn.Parameter(torch.zeros(1))

    def forward(self, features):
        batch = features.shape[0]
        delta = features[:, 4:7] - features[:, 0:3]
        move = self.gain * delta
        grip = torch.zeros(batch, 1) + self.grip_unused
        mean = torch.cat([move, grip], dim=1) + self.bias
        tril = torch.diag_embed(torch.exp(self.log_std).expand(batch, 4))
        info = {
            "weight_gain_x": self.gain[0:1],
            "weight_gain_y": self.gain[1:2],
            "weight_gain_z": self.gain[2:3],
            "latent_dx": delta[:, 0],
        }
        return mean, tril, info
