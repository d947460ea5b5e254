# refine-structure: door_open
# Revision: replaces "reach the handle's coordinates, then push along the handle->target chord"
# (which jammed the gripper against the handle at handle height and never pulled) with the
# demonstration's phase structure: travel high to a hover point beside the handle, drop to
# handle height, then chase a pull point that leads the handle along -x so the hooked gripper
# drags the handle around its hinge. Phases are blended by linear clamp ramps on measured
# distances, so the policy stays memoryless and differentiable.
"""Hover-descend-pull door controller with handle-relative waypoints and one tracking gain."""
import math

import torch
import torch.nn as nn


class OpenDoorPolicy(nn.Module):
    # Inputs are clamped to this magnitude after nan_to_num (positions are within about 1 m).
    INPUT_BOUND = 10.0
    # Keeps square roots differentiable at zero (m^2).
    DIST_EPS = 1e-9
    # Width (m) of the linear ramps that blend phases; small against the 0.12 m / 0.04 m thresholds.
    GATE_WIDTH = 0.01
    # Lower bound (m) for the learned thresholds so the gates stay meaningful.
    MIN_THRESHOLD = 1e-3

    def __init__(self):
        super().__init__()
        # Proportional tracking gain, action units per metre of waypoint error
        # (demo regression act = k*(waypoint - gripper) gave k = 25 on every axis).
        self.k_track = nn.Parameter(torch.tensor([25.0]))
        # Pull point relative to the handle (m): the gripper leads the handle by 5 cm along -x
        # (demo pull phase: zero-action offset 0.050 in x, 0 in y and z).
        self.pull_dx = nn.Parameter(torch.tensor([-0.05]))
        self.pull_dy = nn.Parameter(torch.tensor([0.0]))
        self.pull_dz = nn.Parameter(torch.tensor([0.0]))
        # Hover/drop point relative to the handle (m): 1 cm beyond it in +x, 2 cm in +y
        # (demo approach fit: y offset 0.02; pull offset -0.05 plus 0.06 gives +0.01 in x).
        self.hover_dx = nn.Parameter(torch.tensor([0.01]))
        self.hover_dy = nn.Parameter(torch.tensor([0.02]))
        # Travel height above the handle (m): the demo rises first (act_dz = +1 for 10 steps).
        self.hover_height = nn.Parameter(torch.tensor([0.2]))
        # Horizontal distance (m) from the pull point beyond which the gripper travels high.
        self.far_radius = nn.Parameter(torch.tensor([0.12]))
        # Height error (m) above which the gripper is still descending rather than pulling.
        self.height_tol = nn.Parameter(torch.tensor([0.04]))
        # Gripper command held all episode (1 open, 0 closed); the demo keeps it closed.
        self.gripper_level = nn.Parameter(torch.tensor([0.0]))
        # Per-action exploration/residual std: motion axes ~0.1, gripper command ~0.05.
        self.log_std = nn.Parameter(torch.tensor([math.log(0.1), math.log(0.1), math.log(0.1), math.log(0.05)]))

    def forward(self, features):
        f = torch.clamp(torch.nan_to_num(features, nan=0.0, posinf=0.0, neginf=0.0),
                        -self.INPUT_BOUND, self.INPUT_BOUND)
        gx, gy, gz = f[:, 0], f[:, 1], f[:, 2]
        hx, hy, hz = f[:, 4], f[:, 5], f[:, 6]
        tx, ty, tz = f[:, 36], f[:, 37], f[:, 38]

        # Pull point: leads the handle so the hooked gripper drags it open.
        pull_x = hx + self.pull_dx
        pull_y = hy + self.pull_dy
        pull_z = hz + self.pull_dz
        # Hover/drop point beside the handle, and the safe travel height above it.
        hover_x = hx + self.hover_dx
        hover_y = hy + self.hover_dy
        travel_z = hz + self.hover_height

        # Gate 1: horizontally far from the pull point -> travel high.
        off_x = pull_x - gx
        off_y = pull_y - gy
        dist_xy = torch.sqrt(off_x * off_x + off_y * off_y + self.DIST_EPS)
        far_r = torch.clamp(self.far_radius, min=self.MIN_THRESHOLD)
        far_gate = torch.clamp((dist_xy - far_r) / self.GATE_WIDTH + 0.5, 0.0, 1.0)
        # Gate 2: not yet at handle height -> keep descending at the hover point.
        height_above = gz - hz
        height_gap = torch.sqrt(height_above * height_above + self.DIST_EPS)
        tol = torch.clamp(self.height_tol, min=self.MIN_THRESHOLD)
        high_gate = torch.clamp((height_gap - tol) / self.GATE_WIDTH + 0.5, 0.0, 1.0)

        # Phase weights (sum to one).
        w_travel = far_gate
        w_descend = (1.0 - far_gate) * high_gate
        w_pull = (1.0 - far_gate) * (1.0 - high_gate)

        # Blended waypoint.
        way_x = (w_travel + w_descend) * hover_x + w_pull * pull_x
        way_y = (w_travel + w_descend) * hover_y + w_pull * pull_y
        way_z = w_travel * travel_z + w_descend * hz + w_pull * pull_z

        err_x = way_x - gx
        err_y = way_y - gy
        err_z = way_z - gz
        dx = torch.clamp(self.k_track * err_x, -1.0, 1.0)
        dy = torch.clamp(self.k_track * err_y, -1.0, 1.0)
        dz = torch.clamp(self.k_track * err_z, -1.0, 1.0)
        grip = torch.clamp(self.gripper_level * torch.ones_like(dx), 0.0, 1.0)
        action_mean = torch.stack([dx, dy, dz, grip], dim=1)

        std = torch.exp(self.log_std).unsqueeze(0) * torch.ones_like(action_mean)
        scale_tril = torch.diag_embed(std)

        ht_x = tx - hx
        ht_y = ty - hy
        ht_z = tz - hz
        handle_target_dist = torch.sqrt(ht_x * ht_x + ht_y * ht_y + ht_z * ht_z + self.DIST_EPS)

        info = {
            "weight_k_track": self.k_track,
            "weight_pull_dx": self.pull_dx,
            "weight_pull_dy": self.pull_dy,
            "weight_pull_dz": self.pull_dz,
            "weight_hover_dx": self.hover_dx,
            "weight_hover_dy": self.hover_dy,
            "weight_hover_height": self.hover_height,
            "weight_far_radius": self.far_radius,
            "weight_height_tol": self.height_tol,
            "weight_gripper_level": self.gripper_level,
            "latent_dist_xy_to_pull_point": dist_xy,
            "latent_height_above_handle": height_above,
            "latent_far_gate": far_gate,
            "latent_high_gate": high_gate,
            "latent_phase_travel": w_travel,
            "latent_phase_descend": w_descend,
            "latent_phase_pull": w_pull,
            "latent_waypoint_err_x": err_x,
            "latent_waypoint_err_y": err_y,
            "latent_waypoint_err_z": err_z,
            "latent_handle_target_dist": handle_target_dist,
        }
        return action_mean, scale_tril, info
