"""Pendulum policy: a PD law around upright (zero-shot structure for the pendulum task).

The torque pushes back against the lean and damps the swing. It balances a pendulum that is
already near upright; it has no way to pump energy, so from hanging it only damps the swing.
"""

import torch
from torch import nn


class PendulumPolicy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # Torque per rad of lean: a counter-clockwise lean (angle > 0) needs clockwise torque.
        self.k_angle = nn.Parameter(torch.tensor(10.0))
        # Torque per rad/s: opposing the motion damps it.
        self.k_velocity = nn.Parameter(torch.tensor(2.0))
        self.log_std = nn.Parameter(torch.full((1,), -1.0))
        # The motor's limit in N m (the action bound).
        self.torque_limit = 2.0

    def forward(self, state):
        state = torch.nan_to_num(state)
        angle = state[:, 0]
        velocity = state[:, 1]
        restoring = -self.k_angle * angle
        damping = -self.k_velocity * velocity
        torque = torch.clamp(restoring + damping, -self.torque_limit, self.torque_limit)
        mean = torch.stack([torque], dim=-1)
        scale_tril = torch.diag_embed(torch.exp(self.log_std).expand_as(mean))
        info = {
            "weight_k_angle": self.k_angle.reshape(1),
            "weight_k_velocity": self.k_velocity.reshape(1),
            "latent_restoring": restoring,
            "latent_damping": damping,
            "latent_torque_command": torque,
        }
        return mean, scale_tril, info
