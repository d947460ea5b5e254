"""The MuJoCo door scene (Meta-World door-open-v3) as a real arm: driven by what MoveIt Servo
or a Cartesian controller executes (a twist of the tool) and by a gripper position command,
reporting joint states, the arm's TF tree, a fiducial tracker's view of the handle and the
door's angle.

Why not the task's `step`: a real arm is not stepped by its program. Here the simulator runs
on the wall clock in its own 2.5 ms physics steps, and whatever twist and gripper goal are in
effect act on it, as commands act on hardware; a program sees only the readings.

Frames: the robot's base frame (`base_frame`, default `base_link`) is the Sawyer's
`right_arm_base_link`, which Meta-World places at its world origin with the world's axes:
x to the robot's right, y towards the door, z up. So base-frame coordinates are the door
task's coordinates, and a twist in the base frame moves the hand along them. The TF tree is
the Sawyer's chain, base_link -> right_l0 -> ... -> right_l6 -> right_hand -> hand (the tool
frame, the point Meta-World reports as the hand, 4.5 cm above the fingertips), with the
fingers rightclaw and leftclaw under the hand; beside it the tracker's camera, base_link ->
`camera_frame`, and the marker under the camera when it is seen (`marker.py`).

Commands: a twist (m/s, base frame) moves Meta-World's hand target (its mocap body) at that
velocity, within Meta-World's hand box; the hand follows through its weld, as a servoed arm
follows its set point. Orientation stays Meta-World's fixed grasp orientation, so angular
velocity is not executed (counted in `status()`). Faster than `max_linear_speed` is scaled
down, like Servo's velocity limit; no twist for `twist_timeout_s` halts the hand, like
Servo's incoming-command timeout. The gripper takes a `control_msgs/GripperCommand` goal:
`position` is the opening between the finger pads (m; `OPEN_GAP_M` fully open, `CLOSED_GAP_M`
closed on nothing), `max_effort` caps each finger's force (N; 0 or less: full force, about
400 N as Meta-World closes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refine_ros.robots._twin.frames import JointStates, Pose, Transform
from refine_ros.robots._twin.realtime import (
    DropoutPlan,
    FixedRate,
    Latency,
    Noise,
    check_dropout_names,
    sensor_streams,
)
from refine_ros.robots.arm.marker import MarkerCamera, MarkerSighting, MarkerTracker

ARM_CHAIN = ("right_arm_base_link", "right_l0", "right_l1", "right_l2", "right_l3", "right_l4", "right_l5",
             "right_l6", "right_hand", "hand")  # fmt: skip
FINGERS = ("rightclaw", "leftclaw")
ARM_SENSORS = ("joints", "marker")
PHYSICS_RATE_HZ = 400.0  # Meta-World's MuJoCo timestep is 2.5 ms
OPEN_GAP_M = 0.0943 - 0.006  # pad centres 94.3 mm apart when open, pads 6 mm thick
CLOSED_GAP_M = OPEN_GAP_M - 0.04 - 0.03
"""The pads' gap with both claws at the ends of their travel (4 cm and 3 cm): the fingers' fully
closed, where a Robotiq 2F-85's knuckle reads its closed limit (0.8 rad), closed on nothing."""
PAD_THICKNESS_M = 0.006
ACTUATOR_GAIN = 400.0  # N per unit of Meta-World's finger actuator command


@dataclass(frozen=True)
class TwistCommand:
    """`geometry_msgs/TwistStamped` in the base frame: linear m/s, angular rad/s."""

    linear: tuple[float, float, float] = (0.0, 0.0, 0.0)
    angular: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def finite(self) -> bool:
        return all(math.isfinite(v) for v in (*self.linear, *self.angular))


@dataclass(frozen=True)
class GripperGoal:
    """`control_msgs/GripperCommand`: opening between the pads (m) and force cap (N)."""

    position: float = OPEN_GAP_M
    max_effort: float = 0.0


@dataclass(frozen=True)
class GripperState:
    """What a GripperCommand action reports: opening (m), force (N), stalled, reached_goal."""

    position: float
    effort: float
    stalled: bool
    reached_goal: bool


@dataclass(frozen=True)
class ArmReadings:
    """What the arm's drivers publish at one tick; None where a sensor has nothing due (its
    rate) or is in a dropout. `transforms` come with the joint states (a robot's TF follows
    its encoders); `marker` is a sighting even when the marker is hidden (visible False),
    as a tracker publishes an empty detection list."""

    joints: JointStates | None = None  # right_j0..right_j6 (rad), then r_close, l_close (m)
    transforms: tuple[Transform, ...] | None = None
    marker: MarkerSighting | None = None
    marker_stamp: float | None = None


@dataclass(frozen=True)
class ArmTwinConfig:
    """Everything an arm twin is built from; units in the names, defaults documented."""

    door_seed: int = 0  # where the door stands (the door task's seed)
    seed: int = 0  # sensor noise and random dropouts
    rate_hz: float = 50.0  # joint states and TF
    marker_rate_hz: float = 30.0
    max_linear_speed_mps: float = 0.5
    command_latency_s: float = 0.0
    twist_timeout_s: float = 0.1  # no twist for this long: the hand stops (0 disables)
    gripper_gain_n_per_m: float = 4000.0  # the gripper's position loop
    gripper_tolerance_m: float = 0.002  # within this of the goal: reached
    joint_position_std_rad: float = 1e-4
    marker_camera: MarkerCamera = MarkerCamera()
    marker_position_std_m: float = 0.002
    marker_rotation_std_rad: float = 0.01
    dropouts: dict[str, DropoutPlan] = field(default_factory=dict)  # sensor name -> plan
    base_frame: str = "base_link"
    camera_frame: str = "marker_camera_optical_frame"
    marker_frame: str = "handle_marker"

    def __post_init__(self) -> None:
        check_dropout_names(self.dropouts, ARM_SENSORS)


class ArmTwin:
    """The door scene in real time behind a servoed arm's interfaces.

    `twist(command, now)` and `grip(goal, now)` take commands (effective
    `command_latency_s` later); `tick(now)` advances the physics to `now` (at most 0.1 s at
    once; further lag is dropped and counted in `overruns`) and returns the readings due."""

    def __init__(self, config: ArmTwinConfig = ArmTwinConfig(), start: float = 0.0) -> None:
        from refine_core.tasks.door_open.env import ARM_JOINTS, CLAW_JOINTS, DoorOpenEnv

        self.config = config
        self.env = DoorOpenEnv()
        self.raw = self.env.raw
        self.model, self.data = self.raw.model, self.raw.data
        self.joint_names = (*ARM_JOINTS, *CLAW_JOINTS)
        self._qpos = np.array([self.model.joint(j).qposadr.item() for j in self.joint_names])
        self._qvel = np.array([self.model.joint(j).dofadr.item() for j in self.joint_names])
        self._claw_range = np.array([self.model.jnt_range[self.model.joint(j).id] for j in CLAW_JOINTS])
        self._noise = Noise(config.seed)
        self.tracker = MarkerTracker(self.model, self.data, config.marker_camera,
                                     position_std_m=config.marker_position_std_m,
                                     rotation_std_rad=config.marker_rotation_std_rad,
                                     noise=Noise(config.seed * 100 + 99))  # fmt: skip
        self.start = float(start)
        rates = dict(zip(ARM_SENSORS, (config.rate_hz, config.marker_rate_hz), strict=True))
        self.sensors = sensor_streams(rates, self.start, config.dropouts, config.seed)
        self.reset(config.door_seed, start)

    # -- episode -------------------------------------------------------------------------
    def reset(self, door_seed: int | None = None, now: float | None = None) -> None:
        """The door placed by `door_seed` (the current one when None), closed; the arm at
        Meta-World's home pose with the gripper open; pending commands discarded."""
        now = self.start if now is None else float(now)
        self.door_seed = self.config.door_seed if door_seed is None else int(door_seed)
        self.env.reset(seed=self.door_seed)
        self._physics = FixedRate(PHYSICS_RATE_HZ, now, max_catch_up=int(PHYSICS_RATE_HZ * 0.1))
        self._twists: Latency[TwistCommand] = Latency(self.config.command_latency_s, TwistCommand())
        self._grips: Latency[GripperGoal] = Latency(self.config.command_latency_s, GripperGoal())
        self.door_opened = False
        self.physics_steps = 0
        self.rejected_commands = 0
        self.unexecuted_angular = 0
        self.target_position = np.array(self.raw._target_pos, dtype=float)

    def success(self) -> float:
        """1.0 once the door has opened since the last reset (Meta-World's own success rule,
        its `evaluate_state`: the handle within 0.08 m of the target along x), else 0.0."""
        return 1.0 if self.door_opened else 0.0

    @property
    def overruns(self) -> int:
        return self._physics.skipped

    # -- commands ------------------------------------------------------------------------
    def twist(self, command: TwistCommand, now: float) -> bool:
        if not command.finite():
            self.rejected_commands += 1
            return False
        if any(command.angular):
            self.unexecuted_angular += 1
        self._twists.push(command, now)
        return True

    def grip(self, goal: GripperGoal, now: float) -> bool:
        if not (math.isfinite(goal.position) and math.isfinite(goal.max_effort)):
            self.rejected_commands += 1
            return False
        self._grips.push(goal, now)
        return True

    def velocity_in_effect(self, now: float) -> np.ndarray:
        """The hand velocity (m/s, base frame) the arm executes at `now`."""
        command = self._twists.current(now)
        c = self.config
        if self._twists.timed_out(now, c.twist_timeout_s):
            return np.zeros(3)
        v = np.asarray(command.linear, dtype=float)
        speed = float(np.linalg.norm(v))
        return v * (c.max_linear_speed_mps / speed) if speed > c.max_linear_speed_mps else v

    # -- time ----------------------------------------------------------------------------
    def tick(self, now: float) -> ArmReadings:
        steps = self._physics.due(now)
        if steps:
            self._advance(steps, self.velocity_in_effect(now), self._grips.current(now))
        joints = self.joint_states(now) if self.sensors["joints"].due(now) else None
        marker_due = self.sensors["marker"].due(now)
        return ArmReadings(
            joints=joints,
            transforms=self.transforms() if joints is not None else None,
            marker=self.tracker.look() if marker_due else None,
            marker_stamp=now if marker_due else None,
        )

    def _advance(self, steps: int, velocity: np.ndarray, goal: GripperGoal) -> None:
        import mujoco

        dt = 1.0 / PHYSICS_RATE_HZ
        for _ in range(steps):
            target = self.data.mocap_pos[0] + velocity * dt
            self.data.mocap_pos[0] = np.clip(target, self.raw.mocap_low, self.raw.mocap_high)
            self.data.ctrl[:] = self._finger_commands(goal)
            mujoco.mj_step(self.model, self.data)
        mujoco.mj_forward(self.model, self.data)
        self.physics_steps += steps
        if not self.door_opened:
            obs = self.raw._get_obs()
            self.door_opened = bool(self.raw.evaluate_state(obs, np.zeros(4))[1]["success"])

    def _finger_commands(self, goal: GripperGoal) -> np.ndarray:
        """Meta-World's finger actuators are stiff position servos (force = 400 * (command -
        joint)); the twin sets their commands so that each finger pushes towards its share of
        the goal opening with a force capped at `max_effort`."""
        q = self.data.qpos[self._qpos[-2:]]
        # r_close closes towards +, l_close towards -: each takes half the travel, and a
        # finger at the end of its range leaves the rest to the other
        half = max(0.0, OPEN_GAP_M - float(goal.position)) / 2.0
        r_room, l_room = self._claw_range[0, 1], -self._claw_range[1, 0]
        targets = np.array([min(r_room, half + max(0.0, half - l_room)), -min(l_room, half + max(0.0, half - r_room))])
        cap = goal.max_effort if goal.max_effort > 0 else ACTUATOR_GAIN
        force = np.clip(self.config.gripper_gain_n_per_m * (targets - q), -cap, cap)
        return np.clip(q + force / ACTUATOR_GAIN, -1.0, 1.0)

    # -- ground truth --------------------------------------------------------------------
    def tool_pose(self) -> Pose:
        """The hand (tool frame) in the base frame, exact."""
        return Pose.of_wxyz(self.data.body("hand").xpos, self.data.body("hand").xquat)

    def opening(self) -> float:
        """Gap between the finger pads (m)."""
        d = self.data
        return float(np.linalg.norm(d.body("leftpad").xpos - d.body("rightpad").xpos) - PAD_THICKNESS_M)

    def door_angle(self) -> float:
        """Hinge angle (rad), negative while opening."""
        return self.env.door_angle()

    def gripper_state(self, now: float) -> GripperState:
        goal = self._grips.current(now)
        q_dot = self.data.qvel[self._qvel[-2:]]
        force = float(np.mean(np.abs(self.data.actuator_force)))
        reached = abs(self.opening() - goal.position) <= self.config.gripper_tolerance_m
        stalled = not reached and bool(np.all(np.abs(q_dot) < 1e-3))
        return GripperState(self.opening(), force, stalled, reached)

    def status(self) -> dict[str, Any]:
        return {
            "door_seed": self.door_seed,
            "sim_time": self.physics_steps / PHYSICS_RATE_HZ,
            "door_angle": self.door_angle(),
            "door_opened": self.door_opened,
            "overruns": self.overruns,
            "rejected_commands": self.rejected_commands,
            "unexecuted_angular": self.unexecuted_angular,
            "dropped": {name: s.dropped for name, s in self.sensors.items()},
        }

    # -- readings ------------------------------------------------------------------------
    def joint_states(self, now: float) -> JointStates:
        q = self._noise(self.data.qpos[self._qpos], self.config.joint_position_std_rad)
        v = self.data.qvel[self._qvel]
        return JointStates(now, self.joint_names, tuple(float(x) for x in q), tuple(float(x) for x in v))

    def transforms(self) -> tuple[Transform, ...]:
        """The arm's TF tree from the simulator (exact, as robot_state_publisher computes it
        from the encoders), plus the tracker camera's fixed mount."""
        d = self.data
        poses = {name: Pose.of_wxyz(d.body(name).xpos, d.body(name).xquat) for name in (*ARM_CHAIN, *FINGERS)}
        names = {ARM_CHAIN[0]: self.config.base_frame}
        edges = [*zip(ARM_CHAIN[:-1], ARM_CHAIN[1:], strict=True), *((ARM_CHAIN[-1], f) for f in FINGERS)]
        out = [Transform(names.get(p, p), names.get(c, c), poses[p].inverse() * poses[c]) for p, c in edges]
        out.append(Transform(self.config.base_frame, self.config.camera_frame, self.tracker.camera_pose))
        return tuple(out)

    def marker_transform(self, sighting: MarkerSighting) -> Transform | None:
        """camera -> marker, for a sighting that saw the marker."""
        if not sighting.visible:
            return None
        return Transform(self.config.camera_frame, self.config.marker_frame, sighting.in_camera)

    def close(self) -> None:
        self.env.close()
