"""A small contract-following door program (the tests derive violations from it by editing
single lines, so keep each edited line unique)."""

import torch
from torch import nn


class OpenDoorPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.tensor([5.0]))
        self.grip_bias = nn.Parameter(torch.tensor([0.5]))
        self.log_std = nn.Parameter(torch.tensor([-1.0]))

    def forward(self, features):
        features = torch.nan_to_num(features)
        batch = features.shape[0]
        delta = features[:, 4:7] - features[:, 0:3]
        move = torch.tanh(self.gain * delta)
        grip = torch.sigmoid(self.grip_bias).expand(batch, 1)
        mean = torch.cat([move, grip], dim=1)
        tril = torch.diag_embed(torch.exp(self.log_std).expand(batch, 4))
        info = {"weight_gain": self.gain, "latent_dx": delta[:, 0]}
        return mean, tril, info
