import math
import torch
import torch.nn as nn


class OpenDoorPolicy(nn.Module):
    """Reach above the handle -> descend -> close gripper -> pull along the door's arc.

    Phases are chosen from the current observation through soft piecewise-linear gates.
    Units: metres for positions, commands as a fraction of 0.1 m/s, gripper 1 open / 0 closed.
    """

    # ---- fixed numerical constants (not physical, not tuned) ----
    FEATURE_CLIP = 10.0   # m; workspace is far inside +-10 m, guards against inf / garbage readings
    NORM_EPS = 1e-8       # m^2; keeps square roots differentiable at zero
    WIDTH_FLOOR = 1e-3    # smallest allowed gate width / distance so ramps never divide by ~0
    STD_FLOOR = 1e-3      # smallest action standard deviation, keeps scale_tril diagonal positive

    def __init__(self):
        super().__init__()

        def scalar(value):
            return nn.Parameter(torch.tensor([float(value)]))

        # ---- grasp point relative to the handle tag (m); start at the tag, the fit finds the demo's grip
        self.grasp_off_x = scalar(0.0)
        self.grasp_off_y = scalar(0.0)
        self.grasp_off_z = scalar(0.0)

        # ---- approach
        self.hover_height = scalar(0.10)     # m above the grasp point while still far in x-y (clears the bar)
        self.k_reach = scalar(10.0)          # command per metre of error: 0.1 m -> full 0.1 m/s (1 s time constant)
        self.xy_near_radius = scalar(0.02)   # m: x-y error under which the tool counts as above the grasp point
        self.xy_near_width = scalar(0.04)    # m: width of that gate's ramp
        self.z_near_radius = scalar(0.01)    # m: height error under which the tool is at grasp height
        self.z_near_width = scalar(0.03)     # m: width of that gate's ramp

        # ---- gripper state from the finger reading (1 open, 0 closed on nothing, in between: holding)
        self.grip_open_level = scalar(0.90)  # reading above this: gripper still (nearly) open
        self.grip_open_width = scalar(0.10)  # ramp width below the open level
        self.grip_empty_level = scalar(0.03) # reading below this: closed on nothing
        self.grip_empty_width = scalar(0.03) # ramp width above the empty level

        # ---- door geometry: hinge = target + offset.  Radius 0.4 m is stated by the user.
        # Initial offset assumes the target lies ~75 deg open on that circle:
        # target - hinge = (-0.4 sin 75deg, -0.4 cos 75deg) = (-0.39, -0.10)  ->  hinge - target = (+0.39, +0.10)
        self.hinge_from_target_x = scalar(0.39)
        self.hinge_from_target_y = scalar(0.10)
        self.door_radius = scalar(0.40)      # m, hinge-to-handle distance

        # ---- pulling
        self.pull_speed = scalar(0.6)        # command along the arc tangent: 0.06 m/s, ~9 s for a 75 deg swing
        self.k_radial = scalar(5.0)          # command per metre of radial error, keeps the tool on the arc
        self.k_hold_z = scalar(10.0)         # command per metre of height error while holding (handle z is constant)
        self.slow_distance = scalar(0.05)    # m of remaining y travel over which the pull fades to zero

        # ---- action noise (log standard deviation of each action, in command units)
        self.log_std_dx = scalar(math.log(0.2))
        self.log_std_dy = scalar(math.log(0.2))
        self.log_std_dz = scalar(math.log(0.2))
        self.log_std_gripper = scalar(math.log(0.1))

    def _ramp_down(self, value, start, width):
        # 1 when value <= start, 0 when value >= start + width, linear in between
        w = torch.clamp(width, min=self.WIDTH_FLOOR)
        return torch.clamp((start + w - value) / w, 0.0, 1.0)

    def forward(self, features):
        f = torch.nan_to_num(features, nan=0.0, posinf=self.FEATURE_CLIP, neginf=-self.FEATURE_CLIP)
        f = torch.clamp(f, -self.FEATURE_CLIP, self.FEATURE_CLIP)

        tool_x = f[:, 0]
        tool_y = f[:, 1]
        tool_z = f[:, 2]
        grip = f[:, 3]
        tag_x = f[:, 4]
        tag_y = f[:, 5]
        tag_z = f[:, 6]
        tool_prev_x = f[:, 18]
        tool_prev_y = f[:, 19]
        tool_prev_z = f[:, 20]
        tag_prev_x = f[:, 22]
        tag_prev_y = f[:, 23]
        tag_prev_z = f[:, 24]
        target_x = f[:, 36]
        target_y = f[:, 37]

        # ---- 1) grasp point from the tag and the tool's error to it
        grasp_x = tag_x + self.grasp_off_x
        grasp_y = tag_y + self.grasp_off_y
        grasp_z = tag_z + self.grasp_off_z   # hinge is vertical: handle height never changes, stale tag z is fine
        err_x = grasp_x - tool_x
        err_y = grasp_y - tool_y
        err_z = grasp_z - tool_z
        dist_xy = torch.sqrt(err_x ** 2 + err_y ** 2 + self.NORM_EPS)
        dist_z = torch.sqrt(err_z ** 2 + self.NORM_EPS)
        above_handle = self._ramp_down(dist_xy, self.xy_near_radius, self.xy_near_width)
        at_height = self._ramp_down(dist_z, self.z_near_radius, self.z_near_width)
        at_handle = above_handle * at_height

        # ---- 2) approach: servo to the grasp point, raised by the hover height until above it in x-y
        hover_lift = self.hover_height * (1.0 - above_handle)
        reach_vx = self.k_reach * err_x
        reach_vy = self.k_reach * err_y
        reach_vz = self.k_reach * (err_z + hover_lift)

        # ---- 3) gripper state: holding = partly closed but not closed on nothing
        w_open = torch.clamp(self.grip_open_width, min=self.WIDTH_FLOOR)
        w_empty = torch.clamp(self.grip_empty_width, min=self.WIDTH_FLOOR)
        below_open = torch.clamp((self.grip_open_level - grip) / w_open, 0.0, 1.0)
        above_empty = torch.clamp((grip - self.grip_empty_level) / w_empty, 0.0, 1.0)
        holding = below_open * above_empty

        # close when at the grasp point, keep closed while holding (tag may be hidden / stale then)
        gripper_cmd = torch.clamp(1.0 - at_handle - holding, 0.0, 1.0)

        # ---- 4) pull along the door's arc; handle position from the encoders (tool - grasp offset)
        handle_est_x = tool_x - self.grasp_off_x
        handle_est_y = tool_y - self.grasp_off_y
        hinge_x = target_x + self.hinge_from_target_x
        hinge_y = target_y + self.hinge_from_target_y
        rad_x = handle_est_x - hinge_x
        rad_y = handle_est_y - hinge_y
        rad_len = torch.sqrt(rad_x ** 2 + rad_y ** 2 + self.NORM_EPS)
        unit_rad_x = rad_x / rad_len
        unit_rad_y = rad_y / rad_len
        # opening direction: closed door (handle at -y of hinge) -> tangent -x; at 90 deg -> tangent +y
        tangent_x = unit_rad_y
        tangent_y = -unit_rad_x
        radial_err = self.door_radius - rad_len   # >0: tool inside the circle, push outward
        remaining_y = target_y - handle_est_y     # y travel still needed (door counts open within 8 cm)
        slow_d = torch.clamp(self.slow_distance, min=self.WIDTH_FLOOR)
        pull_fade = torch.clamp(remaining_y / slow_d, 0.0, 1.0)
        arc_speed = self.pull_speed * pull_fade
        pull_vx = arc_speed * tangent_x + self.k_radial * radial_err * unit_rad_x
        pull_vy = arc_speed * tangent_y + self.k_radial * radial_err * unit_rad_y
        pull_vz = self.k_hold_z * err_z

        # ---- 5) blend phases and clamp each action to its bounds
        dx = torch.clamp((1.0 - holding) * reach_vx + holding * pull_vx, -1.0, 1.0)
        dy = torch.clamp((1.0 - holding) * reach_vy + holding * pull_vy, -1.0, 1.0)
        dz = torch.clamp((1.0 - holding) * reach_vz + holding * pull_vz, -1.0, 1.0)
        action_mean = torch.stack([dx, dy, dz, gripper_cmd], dim=-1)

        # ---- 6) noise: diagonal, one standard deviation per action
        ones = torch.ones_like(dx)
        std_dx = (torch.exp(self.log_std_dx) + self.STD_FLOOR) * ones
        std_dy = (torch.exp(self.log_std_dy) + self.STD_FLOOR) * ones
        std_dz = (torch.exp(self.log_std_dz) + self.STD_FLOOR) * ones
        std_grip = (torch.exp(self.log_std_gripper) + self.STD_FLOOR) * ones
        scale_tril = torch.diag_embed(torch.stack([std_dx, std_dy, std_dz, std_grip], dim=-1))

        # ---- diagnostics (logged only, not on the action path)
        door_angle_est = torch.atan2(-rad_x, -rad_y)          # rad, 0 closed, +pi/2 fully open (from encoders)
        tag_rad_x = tag_x - hinge_x
        tag_rad_y = tag_y - hinge_y
        tag_radius = torch.sqrt(tag_rad_x ** 2 + tag_rad_y ** 2 + self.NORM_EPS)
        door_angle_tag = torch.atan2(-tag_rad_x, -tag_rad_y)  # rad, from the (possibly stale) tag
        tag_step_sq = (tag_x - tag_prev_x) ** 2 + (tag_y - tag_prev_y) ** 2 + (tag_z - tag_prev_z) ** 2
        tool_step_sq = (tool_x - tool_prev_x) ** 2 + (tool_y - tool_prev_y) ** 2 + (tool_z - tool_prev_z) ** 2
        tag_step = torch.sqrt(tag_step_sq + self.NORM_EPS)
        tool_step = torch.sqrt(tool_step_sq + self.NORM_EPS)
        tag_repeated = (tag_step_sq <= 0.0).to(dx.dtype).detach()  # 1 when the tag reading is an exact repeat

        info = {}
        for name, param in self.named_parameters():
            info['weight_' + name] = param.reshape(1)

        latents = {
            'err_x': err_x,
            'err_y': err_y,
            'err_z': err_z,
            'dist_xy': dist_xy,
            'dist_z': dist_z,
            'above_handle': above_handle,
            'at_height': at_height,
            'at_handle': at_handle,
            'hover_lift': hover_lift,
            'below_open': below_open,
            'above_empty': above_empty,
            'holding': holding,
            'gripper_cmd': gripper_cmd,
            'reach_vx': reach_vx,
            'reach_vy': reach_vy,
            'reach_vz': reach_vz,
            'handle_est_x': handle_est_x,
            'handle_est_y': handle_est_y,
            'hinge_x': hinge_x,
            'hinge_y': hinge_y,
            'hinge_radius_tool': rad_len,
            'hinge_radius_tag': tag_radius,
            'radial_err': radial_err,
            'tangent_x': tangent_x,
            'tangent_y': tangent_y,
            'door_angle_est': door_angle_est,
            'door_angle_tag': door_angle_tag,
            'remaining_y': remaining_y,
            'pull_fade': pull_fade,
            'arc_speed': arc_speed,
            'pull_vx': pull_vx,
            'pull_vy': pull_vy,
            'pull_vz': pull_vz,
            'tag_step': tag_step,
            'tool_step': tool_step,
            'tag_repeated': tag_repeated,
        }
        for key, value in latents.items():
            info['latent_' + key] = value

        return action_mean, scale_tril, info
