import math
import torch
import torch.nn as nn


def clamp_straight_through(value, low, high):
    """Return clamp(value, low, high) in the forward pass, but let the gradient
    pass as if unclamped, so a mean outside the action bounds can still be
    pulled back towards the demonstrated action during maximum-likelihood fitting."""
    clipped = torch.clamp(value, low, high)
    return value + (clipped - value).detach()


class RacecarPolicy(nn.Module):
    # --- named module constants -------------------------------------------------
    # Tile windows (12 tiles ahead, nearest first; the car is about 1.4 tiles long).
    NEAR_START, NEAR_END = 0, 3    # tiles 0..2: road right where the car is
    MID_START, MID_END = 3, 8      # tiles 3..7: steering look-ahead (pure-pursuit horizon)
    FAR_START, FAR_END = 5, 12     # tiles 5..11: braking look-ahead (need distance to slow down)
    INPUT_LIMIT = 10.0             # replacement for +/-inf in observations (far beyond any real value)
    STD_FLOOR = 1e-3               # keeps the Cholesky diagonal strictly positive

    def __init__(self):
        super().__init__()
        # ---------------- steering (positive = steer right) ----------------
        # Car left of centre (x > 0) -> steer right. Track edge at |x| = 0.2 -> ~0.8 steer there.
        self.k_offset = nn.Parameter(torch.tensor(4.0))
        # Near road heading to the left of the car (theta > 0) -> steer left (negative).
        # ~0.5 rad heading error -> ~0.75 steer.
        self.k_heading = nn.Parameter(torch.tensor(1.5))
        # Upcoming bend (mean theta of look-ahead tiles) -> steer into it early.
        self.k_curve = nn.Parameter(torch.tensor(1.0))
        # Yaw-rate damping: Box2D angular velocity > 0 means rotating left -> counter-steer right.
        # Angular velocity is in rad/s (a few units), so a small gain.
        self.k_yaw_damp = nn.Parameter(torch.tensor(0.05))

        # ---------------- target speed (normalised: 1.0 = 100 units) ----------------
        # Cruise speed on a straight.
        self.v_straight = nn.Parameter(torch.tensor(0.7))
        # Speed reduction per radian of mean heading change over the far tiles.
        self.k_speed_curve = nn.Parameter(torch.tensor(0.4))
        # Extra speed reduction when the tiles ahead are flagged as sharp corners (fraction 0..1).
        self.k_speed_border = nn.Parameter(torch.tensor(0.2))

        # ---------------- throttle ----------------
        # Throttle that holds speed against drag when at the target speed.
        self.gas_hold = nn.Parameter(torch.tensor(0.1))
        # Proportional throttle gain: 0.2 below target (20 speed units) -> full throttle.
        self.k_gas = nn.Parameter(torch.tensor(4.0))
        # Lift the throttle while steering hard (tyre grip is shared between cornering and traction).
        self.k_gas_steer = nn.Parameter(torch.tensor(0.3))

        # ---------------- brake ----------------
        # Proportional brake gain on overspeed.
        self.k_brake = nn.Parameter(torch.tensor(3.0))
        # Overspeed tolerated before braking (normalised speed, 0.05 = 5 units).
        self.brake_margin = nn.Parameter(torch.tensor(0.05))

        # ---------------- action noise (log standard deviations) ----------------
        self.log_std_steer = nn.Parameter(torch.tensor(math.log(0.3)))
        self.log_std_gas = nn.Parameter(torch.tensor(math.log(0.3)))
        self.log_std_brake = nn.Parameter(torch.tensor(math.log(0.2)))

    def forward(self, tiles, indicators):
        tiles = torch.nan_to_num(tiles, nan=0.0, posinf=self.INPUT_LIMIT, neginf=-self.INPUT_LIMIT)
        indicators = torch.nan_to_num(indicators, nan=0.0, posinf=self.INPUT_LIMIT, neginf=-self.INPUT_LIMIT)
        tiles = torch.clamp(tiles, -self.INPUT_LIMIT, self.INPUT_LIMIT)
        indicators = torch.clamp(indicators, -self.INPUT_LIMIT, self.INPUT_LIMIT)

        tile_x = tiles[:, :, 0]        # lateral position of car w.r.t. tile centre (+ = car left)
        tile_theta = tiles[:, :, 2]    # tile heading relative to car (+ = road turns left)
        tile_border = tiles[:, :, 3]   # 1 = sharp corner tile

        speed = indicators[:, 0]           # normalised speed (1.0 = 100 units)
        yaw_rate = indicators[:, 2]        # angular velocity (+ = rotating left)

        # ---------------- features ----------------
        lateral_offset = tile_x[:, 0]                                               # car offset from centre line
        heading_err_near = tile_theta[:, self.NEAR_START:self.NEAR_END].mean(dim=1)  # road direction vs car, here
        curve_ahead = tile_theta[:, self.MID_START:self.MID_END].mean(dim=1)         # signed bend in look-ahead
        curve_mag_far = torch.abs(tile_theta[:, self.FAR_START:self.FAR_END]).mean(dim=1)  # how much turning ahead
        sharp_ahead = tile_border.mean(dim=1)                                        # fraction of sharp-corner tiles

        # ---------------- steering ----------------
        steer_offset_term = self.k_offset * lateral_offset
        steer_heading_term = -self.k_heading * heading_err_near
        steer_curve_term = -self.k_curve * curve_ahead
        steer_damp_term = self.k_yaw_damp * yaw_rate
        steer_raw = steer_offset_term + steer_heading_term + steer_curve_term + steer_damp_term
        steer = clamp_straight_through(steer_raw, -1.0, 1.0)

        # ---------------- speed control ----------------
        target_speed = self.v_straight - self.k_speed_curve * curve_mag_far - self.k_speed_border * sharp_ahead
        speed_error = target_speed - speed          # > 0: too slow, < 0: too fast
        steer_magnitude = torch.abs(steer)

        gas_raw = self.gas_hold + self.k_gas * speed_error - self.k_gas_steer * steer_magnitude
        gas = clamp_straight_through(gas_raw, 0.0, 1.0)

        brake_raw = self.k_brake * (-speed_error) - self.brake_margin
        brake = clamp_straight_through(brake_raw, 0.0, 1.0)

        action_mean = torch.stack([steer, gas, brake], dim=1)

        # ---------------- noise ----------------
        std_steer = torch.exp(self.log_std_steer) + self.STD_FLOOR
        std_gas = torch.exp(self.log_std_gas) + self.STD_FLOOR
        std_brake = torch.exp(self.log_std_brake) + self.STD_FLOOR
        std_vec = torch.stack([std_steer, std_gas, std_brake])          # (3,)
        std_batch = std_vec.unsqueeze(0).expand(action_mean.shape[0], 3)  # (B, 3)
        scale_tril = torch.diag_embed(std_batch)

        info = {
            # coefficients
            'weight_k_offset': self.k_offset.reshape(1),
            'weight_k_heading': self.k_heading.reshape(1),
            'weight_k_curve': self.k_curve.reshape(1),
            'weight_k_yaw_damp': self.k_yaw_damp.reshape(1),
            'weight_v_straight': self.v_straight.reshape(1),
            'weight_k_speed_curve': self.k_speed_curve.reshape(1),
            'weight_k_speed_border': self.k_speed_border.reshape(1),
            'weight_gas_hold': self.gas_hold.reshape(1),
            'weight_k_gas': self.k_gas.reshape(1),
            'weight_k_gas_steer': self.k_gas_steer.reshape(1),
            'weight_k_brake': self.k_brake.reshape(1),
            'weight_brake_margin': self.brake_margin.reshape(1),
            'weight_std_steer': std_steer.reshape(1),
            'weight_std_gas': std_gas.reshape(1),
            'weight_std_brake': std_brake.reshape(1),
            # intermediate quantities
            'latent_lateral_offset': lateral_offset,
            'latent_heading_err_near': heading_err_near,
            'latent_curve_ahead': curve_ahead,
            'latent_curve_mag_far': curve_mag_far,
            'latent_sharp_ahead': sharp_ahead,
            'latent_yaw_rate': yaw_rate,
            'latent_steer_offset_term': steer_offset_term,
            'latent_steer_heading_term': steer_heading_term,
            'latent_steer_curve_term': steer_curve_term,
            'latent_steer_damp_term': steer_damp_term,
            'latent_steer_raw': steer_raw,
            'latent_speed': speed,
            'latent_target_speed': target_speed,
            'latent_speed_error': speed_error,
            'latent_gas_raw': gas_raw,
            'latent_brake_raw': brake_raw,
        }
        return action_mean, scale_tril, info
