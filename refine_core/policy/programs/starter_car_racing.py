# refine-structure: car_racing
"""Racecar policy built from named driving quantities (offline catalogue structure).

Steering follows the nearest tile's lateral offset only.
Gas and brake are constants.
"""

import torch
from torch import nn


class RacecarPolicy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # The car left of the tile centre (x > 0) must steer right (positive steer).
        self.k_offset = nn.Parameter(torch.tensor(2.0))
        self.steer_bias = nn.Parameter(torch.tensor(0.0))
        self.gas = nn.Parameter(torch.tensor(0.5))
        self.brake = nn.Parameter(torch.tensor(0.0))
        self.log_std = nn.Parameter(torch.full((3,), -1.0))

    def forward(self, tiles, indicators):
        tiles = torch.nan_to_num(tiles)
        indicators = torch.nan_to_num(indicators)
        offset = tiles[:, 0, 0]
        steer = self.k_offset * offset + self.steer_bias
        gas = self.gas * torch.ones_like(offset)
        brake = self.brake * torch.ones_like(offset)
        mean = torch.stack([steer, gas, brake], dim=-1)
        scale_tril = torch.diag_embed(torch.exp(self.log_std).expand_as(mean))
        info = {
            "weight_k_offset": self.k_offset.reshape(1),
            "weight_steer_bias": self.steer_bias.reshape(1),
            "weight_gas": self.gas.reshape(1),
            "weight_brake": self.brake.reshape(1),
            "latent_offset": offset,
            "latent_steer_command": steer,
        }
        return mean, scale_tril, info
