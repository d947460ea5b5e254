"""The arm twin: Meta-World's door scene driven like a servoed arm (a Cartesian twist, a
gripper goal), its joint states and TF tree, and the marker tracker that loses the handle
behind the gripper. The clock is the test's. No ROS."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from refine_core.tasks.door_open.expert import DoorExpert
from refine_ros.robots._twin.frames import Pose
from refine_ros.robots._twin.realtime import DropoutPlan
from refine_ros.robots.arm.twin import (
    CLOSED_GAP_M,
    OPEN_GAP_M,
    ArmTwin,
    ArmTwinConfig,
    GripperGoal,
    TwistCommand,
)

PERIOD = 0.02  # 50 Hz
EXACT = dict(joint_position_std_rad=0.0, marker_position_std_m=0.0, marker_rotation_std_rad=0.0)


def run(twin: ArmTwin, ticks: int, start: float, twist=None, goal=None):
    """Tick every 20 ms from `start`, sending the twist/goal first when given; readings."""
    out = []
    for k in range(ticks):
        t = round(start + k * PERIOD, 9)
        if twist is not None:
            twin.twist(twist, t)
        if goal is not None:
            twin.grip(goal, t)
        out.append((t, twin.tick(t)))
    return out


@pytest.fixture
def arm():
    twin = ArmTwin(ArmTwinConfig(**EXACT))
    yield twin
    twin.close()


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_an_open_loop_twist_moves_the_hand_by_the_commanded_amount(arm, axis):
    """0.05 m/s for one second, then a zero twist: the hand ends 5 cm further along that
    axis of the base frame and nowhere else (the weld lets it trail by under a millimetre)."""
    run(arm, 25, 0.0)  # settle at home
    before = np.array(arm.tool_pose().position)
    velocity = [0.0, 0.0, 0.0]
    velocity[axis] = 0.05
    run(arm, 50, 0.5, twist=TwistCommand(tuple(velocity)))
    run(arm, 25, 1.5, twist=TwistCommand())
    moved = np.array(arm.tool_pose().position) - before
    expected = np.zeros(3)
    expected[axis] = 0.05
    np.testing.assert_allclose(moved, expected, atol=0.0015)


def test_twists_are_speed_limited_and_stop_when_the_commands_stop(arm):
    run(arm, 5, 0.0)
    start = arm.data.mocap_pos[0].copy()
    run(arm, 10, 0.1, twist=TwistCommand((0.0, 0.0, 2.0)))  # 0.2 s asked at 2 m/s
    np.testing.assert_allclose(arm.data.mocap_pos[0] - start, [0, 0, 0.5 * 0.2], atol=0.003)
    after = arm.data.mocap_pos[0].copy()
    run(arm, 25, 0.3)  # silence: the twist times out after 0.1 s
    assert np.linalg.norm(arm.data.mocap_pos[0] - after) <= 0.5 * (0.1 + PERIOD) + 1e-9
    assert not arm.twist(TwistCommand((float("nan"), 0.0, 0.0)), 1.0)
    arm.twist(TwistCommand((0.0, 0.0, 0.0), (0.0, 0.0, 1.0)), 1.0)
    assert arm.status()["unexecuted_angular"] == 1 and arm.status()["rejected_commands"] == 1


def test_the_base_frame_is_the_door_tasks_frame_and_the_tf_chain_reaches_the_hand(arm):
    run(arm, 5, 0.0)
    np.testing.assert_allclose(arm.tool_pose().position, arm.env.gripper_position(), atol=1e-12)
    transforms = {(t.parent, t.child): t.pose for t in arm.transforms()}
    chain = ["base_link", "right_l0", "right_l1", "right_l2", "right_l3", "right_l4", "right_l5", "right_l6",
             "right_hand", "hand"]  # fmt: skip
    pose = Pose((0.0, 0.0, 0.0))
    for parent, child in zip(chain, chain[1:], strict=False):
        pose = pose * transforms[(parent, child)]
    np.testing.assert_allclose(pose.position, arm.tool_pose().position, atol=1e-9)
    np.testing.assert_allclose(np.abs(np.dot(pose.orientation, arm.tool_pose().orientation)), 1.0, atol=1e-9)
    assert ("hand", "rightclaw") in transforms and ("base_link", "marker_camera_optical_frame") in transforms


def test_the_marker_seen_through_the_camera_is_the_handle_in_the_base_frame(arm):
    sighting = next(r.marker for _, r in run(arm, 3, 0.0) if r.marker is not None)
    assert sighting.visible
    truth = arm.tracker.true_pose()
    camera = dict(((t.parent, t.child), t.pose) for t in arm.transforms())[("base_link", "marker_camera_optical_frame")]
    through_camera = camera * arm.marker_transform(sighting).pose
    np.testing.assert_allclose(through_camera.position, truth.position, atol=1e-9)
    np.testing.assert_allclose(truth.position, arm.env.handle_position(), atol=1e-12)
    assert sighting.in_camera.position[2] > 0, "the marker is in front of the camera"


def _segment_hits_box(p0, p1, centre, rotation, half_size) -> bool:
    """Slab test: does the segment p0-p1 pass through the oriented box?"""
    a, b = rotation.T @ (p0 - centre), rotation.T @ (p1 - centre)
    t0, t1 = 0.0, 1.0
    for i in range(3):
        d = b[i] - a[i]
        if abs(d) < 1e-12:
            if abs(a[i]) > half_size[i]:
                return False
            continue
        lo, hi = sorted(((-half_size[i] - a[i]) / d, (half_size[i] - a[i]) / d))
        t0, t1 = max(t0, lo), min(t1, hi)
        if t0 > t1:
            return False
    return True


def test_the_marker_is_lost_exactly_when_a_finger_crosses_the_line_of_sight(arm):
    """Sweep the open gripper sideways across the camera's line of sight to the handle: the
    tracker loses the marker exactly where one of the fingers' boxes, tested here with plain
    geometry, cuts a line from the camera to the tag, and sees it through the gap between
    the fingers and beside them."""
    m, d = arm.model, arm.data
    camera = np.array(arm.config.marker_camera.position)
    handle = d.geom_xpos[arm.tracker.geom].copy()
    fingers = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX
               and m.body(m.geom_bodyid[g]).name in ("hand", "rightclaw", "rightpad", "leftclaw", "leftpad")]
    on_line = handle + 0.25 * (camera - handle) + [0.0, 0.0, 0.045]  # fingertips on the line
    verdicts = []
    for dy in np.linspace(-0.08, 0.08, 33):
        d.mocap_pos[0] = on_line + [0.0, dy, 0.0]
        for _ in range(400):
            mujoco.mj_step(m, d)
        mujoco.mj_forward(m, d)
        sighting = arm.tracker.look()
        crossed = any(_segment_hits_box(camera, p, d.geom_xpos[g], d.geom_xmat[g].reshape(3, 3), m.geom_size[g])
                      for p in arm.tracker.tag_points() for g in fingers)  # fmt: skip
        assert sighting.visible == (not crossed), (dy, sighting)
        if not sighting.visible:
            assert sighting.occluder in ("rightclaw", "rightpad", "leftclaw", "leftpad")
        verdicts.append(sighting.visible)
    # seen beside the gripper, lost behind each finger, seen through the gap between them
    changes = [k for k in range(1, len(verdicts)) if verdicts[k] != verdicts[k - 1]]
    assert len(changes) == 4 and verdicts[0] and verdicts[16] and verdicts[-1]


def finger_forces(arm: ArmTwin, t: float, goal: GripperGoal) -> float:
    """One tick with `goal`, watching the fingers' actuator forces at every physics step."""
    arm.grip(goal, round(float(t), 9))
    worst = 0.0
    real_step = mujoco.mj_step

    def step(model, data):
        nonlocal worst
        real_step(model, data)
        worst = max(worst, float(np.abs(data.actuator_force).max()))

    mujoco.mj_step = step
    try:
        arm.tick(round(float(t), 9))
    finally:
        mujoco.mj_step = real_step
    return worst


def test_the_gripper_goes_to_its_goal_opening_within_its_force_cap(arm):
    run(arm, 40, 0.0, goal=GripperGoal(position=0.04))
    state = arm.gripper_state(0.8)
    assert state.position == pytest.approx(0.04, abs=0.002) and state.reached_goal
    capped = [finger_forces(arm, t, GripperGoal(position=0.0, max_effort=20.0)) for t in np.arange(0.8, 3.0, PERIOD)]
    state = arm.gripper_state(3.0)
    assert state.position < 0.02 and not state.reached_goal and state.stalled  # the fingers' end stop
    assert state.position == pytest.approx(CLOSED_GAP_M, abs=0.001), "the closed limit the driver maps to"
    assert max(capped) <= 20.0 + 1e-6
    full = [finger_forces(arm, t, GripperGoal(OPEN_GAP_M, 0.0)) for t in np.arange(3.0, 4.0, PERIOD)]
    assert max(full) > 20.0, "without a cap the fingers push harder"
    assert arm.opening() == pytest.approx(OPEN_GAP_M, abs=0.01)


def test_latency_delays_twists_and_gripper_goals_by_the_configured_time():
    arm = ArmTwin(ArmTwinConfig(command_latency_s=0.1, **EXACT))
    run(arm, 10, 0.0)
    start = arm.data.mocap_pos[0].copy()
    arm.twist(TwistCommand((0.1, 0.0, 0.0)), 0.2)
    arm.grip(GripperGoal(0.02), 0.2)
    run(arm, 5, 0.2)  # up to 0.28
    assert np.array_equal(arm.data.mocap_pos[0], start) and arm.opening() > 0.08
    run(arm, 10, 0.3)
    assert arm.data.mocap_pos[0][0] > start[0] and arm.opening() < 0.08
    arm.close()


def test_dropouts_silence_joint_states_and_the_tracker_in_their_windows():
    plan = {"joints": DropoutPlan.of([(0.2, 0.4)]), "marker": DropoutPlan.of([(0.5, 0.6)])}
    arm = ArmTwin(ArmTwinConfig(dropouts=plan, **EXACT))
    log = run(arm, 50, 0.0)
    joints = [t for t, r in log if r.joints is not None]
    marker = [t for t, r in log if r.marker is not None]
    assert not [t for t in joints if 0.2 <= t < 0.4] and len(joints) == 40
    assert all(r.transforms is not None for _, r in log if r.joints is not None)
    assert not [t for t in marker if 0.5 <= t < 0.6] and len(marker) > 20
    assert arm.status()["dropped"] == {"joints": 10, "marker": 3}
    arm.close()


def test_the_same_seed_gives_the_same_readings():
    def readings(seed):
        arm = ArmTwin(ArmTwinConfig(seed=seed))
        log = run(arm, 30, 0.0, twist=TwistCommand((0.02, 0.0, 0.0)))
        arm.close()
        return [(r.joints, r.marker) for _, r in log]

    assert readings(3) == readings(3)
    assert readings(3) != readings(4)


def test_the_door_opens_through_the_twins_interfaces_and_the_twin_reports_it():
    """Meta-World's expert, fed only what the robot's interfaces give (hand pose from TF,
    handle pose from the tracker, held while the marker is hidden), commanding twists and
    gripper goals at 50 Hz."""
    arm = ArmTwin(ArmTwinConfig(door_seed=2, max_linear_speed_mps=1.0))
    expert = DoorExpert()
    handle, previous, hidden = None, None, 0
    for k in range(600):
        t = round(k * PERIOD, 9)
        readings = arm.tick(t)
        if readings.marker is not None:
            if readings.marker.visible:
                handle = readings.marker.in_base
            else:
                hidden += 1
        if handle is None:
            continue
        current = np.zeros(18)
        current[0:3] = arm.tool_pose().position
        current[3] = min(1.0, (arm.opening() + 0.006) / 0.1)
        current[4:7], current[7:11] = handle.position, handle.orientation
        action = expert(np.concatenate([current, current if previous is None else previous, arm.target_position]))
        previous = current
        # the expert's unit action moves Meta-World's hand 1 cm per 12.5 ms step: 0.8 m/s
        arm.twist(TwistCommand(tuple(0.8 * action[:3])), t)
        arm.grip(GripperGoal(OPEN_GAP_M if action[3] > 0.5 else 0.0), t)
    assert arm.success() == 1.0 and arm.door_angle() < -1.0
    assert hidden > 0, "the gripper hid the marker around the grasp"
    arm.close()


def test_the_tick_cost_bench_reports_every_tick():
    from refine_ros.robots.arm.bench import arm_step_cost

    fig = arm_step_cost(seconds=1.0, progress=False)
    assert fig["ticks"] == 50 and fig["period_ms"] == 20.0
    assert 0 < fig["p50_ms"] <= fig["p99_ms"] <= fig["max_ms"]
    assert fig["status"]["sim_time"] == pytest.approx(0.98 + 1 / 400, abs=1e-9)
