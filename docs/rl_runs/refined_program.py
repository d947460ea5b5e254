# refine-structure: car_racing
# refine-edit: car_lookahead
# refine-edit: car_speed
"""Racecar policy built from named driving quantities (offline catalogue structure).

Steering follows the nearest tile's lateral offset plus the heading and lateral offset of the
tiles ahead (a linear stand-in for aiming at a point further down the road).
A target speed falls with the bend ahead; gas pushes up to it, brake pulls down to it.
"""

import torch
from torch import nn


class RacecarPolicy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # The car left of the tile centre (x > 0) must steer right (positive steer).
        self.k_offset = nn.Parameter(torch.tensor(2.0))
        self.steer_bias = nn.Parameter(torch.tensor(0.0))
        # A road turning left (theta > 0) needs left (negative) steer; the offset from the
        # tiles further ahead says the same as the nearest offset, earlier.
        self.k_heading_near = nn.Parameter(torch.tensor(-0.5))
        self.k_heading_far = nn.Parameter(torch.tensor(-0.5))
        self.k_offset_far = nn.Parameter(torch.tensor(1.0))
        # Tile ranges of the track ahead (tile 0 is the nearest): near 1-4, far 5-11.
        self.near = slice(1, 5)
        self.far = slice(5, 12)
        # Target speed (speed / 100 units): fast on straights, slower per radian of bend ahead.
        self.v_straight = nn.Parameter(torch.tensor(0.9))
        self.k_bend = nn.Parameter(torch.tensor(0.3))
        # Gas above zero and brake below zero of the speed error, as logistic switches.
        self.k_gas = nn.Parameter(torch.tensor(10.0))
        self.gas_bias = nn.Parameter(torch.tensor(0.0))
        self.k_brake = nn.Parameter(torch.tensor(10.0))
        self.brake_bias = nn.Parameter(torch.tensor(-2.0))
        # Tiles whose heading measures the bend ahead.
        self.bend_tiles = slice(5, 12)
        self.log_std = nn.Parameter(torch.full((3,), -1.0))

    def forward(self, tiles, indicators):
        tiles = torch.nan_to_num(tiles)
        indicators = torch.nan_to_num(indicators)
        offset = tiles[:, 0, 0]
        steer = self.k_offset * offset + self.steer_bias
        heading_near = tiles[:, self.near, 2].mean(dim=1)
        heading_far = tiles[:, self.far, 2].mean(dim=1)
        offset_far = tiles[:, self.far, 0].mean(dim=1)
        steer = (
            steer
            + self.k_heading_near * heading_near
            + self.k_heading_far * heading_far
            + self.k_offset_far * offset_far
        )
        speed = indicators[:, 0]
        bend = tiles[:, self.bend_tiles, 2].abs().mean(dim=1)
        target_speed = self.v_straight - self.k_bend * bend
        speed_error = target_speed - speed
        gas = torch.sigmoid(self.k_gas * speed_error + self.gas_bias)
        brake = torch.sigmoid(self.brake_bias - self.k_brake * speed_error)
        mean = torch.stack([steer, gas, brake], dim=-1)
        scale_tril = torch.diag_embed(torch.exp(self.log_std).expand_as(mean))
        info = {
            "weight_k_offset": self.k_offset.reshape(1),
            "weight_steer_bias": self.steer_bias.reshape(1),
            "weight_k_heading_near": self.k_heading_near.reshape(1),
            "weight_k_heading_far": self.k_heading_far.reshape(1),
            "weight_k_offset_far": self.k_offset_far.reshape(1),
            "weight_v_straight": self.v_straight.reshape(1),
            "weight_k_bend": self.k_bend.reshape(1),
            "weight_k_gas": self.k_gas.reshape(1),
            "weight_k_brake": self.k_brake.reshape(1),
            "latent_offset": offset,
            "latent_steer_command": steer,
            "latent_heading_near": heading_near,
            "latent_heading_far": heading_far,
            "latent_offset_far": offset_far,
            "latent_bend": bend,
            "latent_target_speed": target_speed,
            "latent_speed_error": speed_error,
        }
        return mean, scale_tril, info
