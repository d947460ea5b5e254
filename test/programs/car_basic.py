"""A small car program: steer toward the tile centre, constant gas, no brake."""

import math

import torch
import torch.nn.functional as F
from torch import nn


class RacecarPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.k_lateral = nn.Parameter(torch.tensor([-2.0]))
        self.k_heading = nn.Parameter(torch.tensor([1.0]))
        self.gas = nn.Parameter(torch.tensor([0.3]))
        self.std_raw = nn.Parameter(torch.full((3,), math.log(math.e - 1.0)))

    def forward(self, tiles, indicators):
        tiles = torch.nan_to_num(tiles)
        lateral = tiles[:, 0, 0]
        heading = tiles[:, 1, 2]
        steer = torch.tanh(self.k_lateral * lateral + self.k_heading * heading)
        gas = self.gas.expand_as(steer)
        brake = torch.zeros_like(steer)
        mean = torch.stack([steer, gas, brake], dim=1)
        std = F.softplus(self.std_raw) * 0.1 + 1e-3
        tril = torch.diag_embed(std.expand(tiles.shape[0], 3))
        info = {
            "weight_k_lateral": self.k_lateral,
            "latent_lateral": lateral,
            "latent_speed": indicators[:, 0],
        }
        return mean, tril, info
