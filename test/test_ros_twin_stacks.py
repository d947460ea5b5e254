"""Each stock-stack emulation of the twins, over real DDS: the twin node is never kinder than the
robot's own stack. The arm: MoveIt Servo's stamp-judged timeout, its pause (no status, nothing
executed), its unitless scaling, read from its own parameters; a forward velocity controller
that holds its last command; robot_state_publisher's 20 Hz /tf; a tag detector's latency; the
ParallelGripperCommand server rejecting a goal with two positions. The car: F1TENTH's pad
holding ackermann_mux until RB is held, and the VESC keeping its speed until its firmware
timeout, then coasting. The rules without DDS: test/test_stock_stacks.py."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


class Arm:
    """An arm twin in this process, and a client that speaks to it as a bridge would."""

    def __init__(self, context, **overrides) -> None:
        from geometry_msgs.msg import TwistStamped
        from moveit_msgs.srv import ServoCommandType
        from rclpy.node import Node
        from rclpy.parameter import Parameter
        from std_msgs.msg import Float64MultiArray
        from std_srvs.srv import SetBool
        from tf2_msgs.msg import TFMessage

        from refine_ros.bringup.spin import NodeSpinner
        from refine_ros.robots.arm.arm_twin import ArmTwinNode
        from refine_ros.wire import qos

        self.twin = ArmTwinNode(context=context, parameter_overrides=[Parameter(k, value=v)
                                                                      for k, v in overrides.items()])
        self.node = node = Node("stack_client", context=context)
        self.lock = threading.Lock()
        self.truth: list[list[float]] = []
        self.tf: list[tuple[float, str, float]] = []  # arrival, child frame, stamp
        self.status = 0
        node.create_subscription(Float64MultiArray, "/arm_twin/ground_truth",
                                 lambda m: self._append(self.truth, list(m.data)), qos.LOG)
        node.create_subscription(TFMessage, "/tf", self._on_tf, qos.TF)
        if self.twin.interface == "servo_jazzy":
            from moveit_msgs.msg import ServoStatus

            node.create_subscription(ServoStatus, "/servo_node/status", self._on_status, qos.STATE)
        self.twists = node.create_publisher(TwistStamped, "/servo_node/delta_twist_cmds", qos.COMMAND)
        self.velocities = node.create_publisher(Float64MultiArray, "/forward_velocity_controller/commands",
                                                qos.COMMAND)
        self.switch = node.create_client(ServoCommandType, "/servo_node/switch_command_type")
        self.pause = node.create_client(SetBool, "/servo_node/pause_servo")
        self.TwistStamped, self.ServoCommandType, self.SetBool = TwistStamped, ServoCommandType, SetBool
        self.spinner = NodeSpinner([self.twin, *self.twin.companion_nodes, node], context).start()

    def _append(self, items: list, item) -> None:
        with self.lock:
            items.append(item)

    def _on_tf(self, msg) -> None:
        now = time.monotonic()
        for t in msg.transforms:
            self._append(self.tf, (now, t.child_frame_id, t.header.stamp.sec + t.header.stamp.nanosec * 1e-9))

    def _on_status(self, _msg) -> None:
        self.status += 1

    def call(self, client, request):
        assert client.wait_for_service(timeout_sec=30.0)
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(10.0)
        return future.result()

    def start_servo(self) -> None:
        assert self.call(self.switch, self.ServoCommandType.Request(command_type=1)).success
        assert self.call(self.pause, self.SetBool.Request(data=False)).success

    def twist(self, vx: float, seconds: float, age: float = 0.0) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            msg = self.TwistStamped()
            msg.header.frame_id = "base_link"
            stamp = self.node.get_clock().now().nanoseconds * 1e-9 - age
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp), int((stamp % 1) * 1e9)
            msg.twist.linear.x = vx
            self.twists.publish(msg)
            time.sleep(0.02)

    def tool(self) -> np.ndarray:
        assert _wait(lambda: len(self.truth) > 0, 30.0)
        with self.lock:
            return np.array(self.truth[-1][1:4])

    def commanded(self) -> float:
        with self.lock:
            return self.truth[-1][5]

    def close(self) -> None:
        self.spinner.stop()
        self.node.destroy_node()
        self.twin.destroy_node()


@pytest.fixture
def arm(context):
    made: list[Arm] = []

    def make(**overrides) -> Arm:
        made.append(Arm(context, **overrides))
        return made[-1]

    yield make
    for a in made:
        a.close()


def test_servo_judges_a_twist_by_its_stamp_and_halts_after_its_timeout(arm):
    a = arm(command_in_type="speed_units")
    a.start_servo()
    time.sleep(1.0)  # the hand settles at home
    start = a.tool()
    a.twist(0.1, 0.5, age=0.2)  # stamped by a clock 0.2 s behind: stale on arrival
    assert abs(a.tool()[0] - start[0]) < 0.002, "Servo executed twists older than its timeout"
    a.twist(0.1, 0.5)
    assert a.tool()[0] - start[0] > 0.02
    time.sleep(0.15)
    assert a.commanded() == 0.0, "no twist for 0.1 s: Servo halts"


def test_a_paused_jazzy_servo_executes_nothing_and_publishes_no_status(arm):
    a = arm(command_in_type="speed_units")
    a.start_servo()
    assert _wait(lambda: a.status > 5, 10.0), "Servo's status while it runs"
    assert a.call(a.pause, a.SetBool.Request(data=True)).success
    time.sleep(0.2)
    before, start = a.status, a.tool()
    a.twist(0.1, 0.5)
    assert a.status == before, "a paused Jazzy Servo publishes no status"
    assert np.linalg.norm(a.tool() - start) < 0.002, "a paused Servo moved the arm"


def test_unitless_servo_scales_the_twist_by_its_scale_linear(arm):
    a = arm()  # Servo's default: unitless, scale.linear 0.4
    a.start_servo()
    start = a.tool()
    a.twist(0.1, 1.0)
    time.sleep(0.3)
    moved = a.tool()[0] - start[0]
    assert 0.025 < moved < 0.06, f"0.1 unitless for 1 s at scale 0.4 moves about 0.04 m, moved {moved:.3f}"


def test_a_forward_velocity_controller_holds_its_last_command(arm):
    from std_msgs.msg import Float64MultiArray

    a = arm(command_interface="forward_velocity")
    start = a.tool()
    a.velocities.publish(Float64MultiArray(data=[0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]))  # once, then silence
    time.sleep(1.5)
    first = a.tool()
    time.sleep(1.0)
    assert np.linalg.norm(first - start) > 0.02 and np.linalg.norm(a.tool() - first) > 0.02, \
        "one command, then silence: the controller holds it and the arm keeps moving"
    assert a.commanded() > 0.0
    a.velocities.publish(Float64MultiArray(data=[0.0] * 7))
    time.sleep(0.3)
    assert a.commanded() == 0.0


def test_tf_comes_at_robot_state_publishers_rate_and_the_tag_one_detection_late(arm):
    a = arm(detection_latency=0.08)
    time.sleep(3.0)
    with a.lock:
        tool = [t for t in a.tf if t[1] == "tool0"]
        tag = [t for t in a.tf if t[1] == "door_handle"]
    span = tool[-1][0] - tool[0][0]
    assert len(tool) / span < 22.0, f"tool0 on /tf at {len(tool) / span:.1f} Hz, robot_state_publisher's is 20"
    wall_minus_ros = time.monotonic() - a.node.get_clock().now().nanoseconds * 1e-9
    ages = [arrival - (stamp + wall_minus_ros) for arrival, _, stamp in tag]
    assert tag and min(ages) >= 0.07, f"tag poses {min(ages):.3f} s old on arrival, the detector takes 0.08 s"


def test_the_robotiq_server_takes_parallel_gripper_commands_of_one_joint_only(arm, context):
    from control_msgs.action import ParallelGripperCommand
    from sensor_msgs.msg import JointState

    from refine_ros.bringup.spin import action_client

    a = arm()
    client = action_client(a.node, ParallelGripperCommand, "/robotiq_gripper_controller/gripper_cmd")
    assert client.wait_for_server(timeout_sec=30.0)
    sent = []
    for names, positions in ((["a", "b"], [0.1, 0.2]), (["robotiq_85_left_knuckle_joint"], [0.8])):
        future = client.send_goal_async(ParallelGripperCommand.Goal(command=JointState(name=names, position=positions)))
        assert _wait(future.done, 10.0)
        sent.append(future.result().accepted)
    assert sent == [False, True]


# ---- the car ---------------------------------------------------------------------------------------
@pytest.fixture
def car(context):
    from ackermann_msgs.msg import AckermannDriveStamped
    from rclpy.node import Node
    from sensor_msgs.msg import Joy
    from std_msgs.msg import Float64MultiArray

    from refine_ros.bringup.spin import NodeSpinner
    from refine_ros.robots.rc_car.car_twin import CarTwinNode
    from refine_ros.wire import qos

    twin = CarTwinNode(context=context)
    node = Node("car_stack_client", context=context)
    state = {"truth": [], "buttons": [0] * 12, "speed": None}
    node.create_subscription(Float64MultiArray, "/car_twin/ground_truth",
                             lambda m: state["truth"].append(list(m.data)), qos.LOG)
    drive = node.create_publisher(AckermannDriveStamped, "/drive", qos.COMMAND)
    pad = node.create_publisher(Joy, "/joy", qos.SENSOR)

    def tick() -> None:
        pad.publish(Joy(axes=[0.0] * 6, buttons=list(state["buttons"])))  # joy_node's autorepeat, 20 Hz

    def drive_tick() -> None:
        if state["speed"] is not None:
            cmd = AckermannDriveStamped()
            cmd.drive.speed = state["speed"]
            drive.publish(cmd)

    node.create_timer(0.05, tick)
    node.create_timer(0.02, drive_tick)
    spinner = NodeSpinner([twin, node], context).start()
    assert _wait(lambda: len(state["truth"]) > 10, 30.0)
    yield state
    spinner.stop()
    node.destroy_node()
    twin.destroy_node()


def test_drive_reaches_the_vesc_only_while_the_pads_rb_is_held(car):
    car["speed"] = 0.6
    time.sleep(1.0)
    assert car["truth"][-1][5] == 0.0 and abs(car["truth"][-1][4]) < 0.05, "the idle pad's zero teleop holds the mux"
    car["buttons"][5] = 1  # RB
    time.sleep(1.0)
    assert car["truth"][-1][5] == pytest.approx(0.6) and car["truth"][-1][4] > 0.2


def test_the_vesc_keeps_its_speed_until_its_firmware_timeout_then_the_car_coasts(car):
    car["buttons"][5] = 1
    car["speed"] = 0.6
    time.sleep(2.0)
    t_stop = car["truth"][-1][0]
    car["speed"] = None  # our /drive goes silent: the mux sends nothing, the VESC holds its setpoint
    time.sleep(2.0)
    rows = [r for r in car["truth"] if r[0] > t_stop]
    driven = [r[0] - t_stop for r in rows if r[5] > 0.0]
    assert 0.9 < max(driven) < 1.15, f"the motor was driven {max(driven):.2f} s after the last command; the VESC's 1 s"
    after = [r for r in rows if r[0] - t_stop > 1.2]
    assert after[0][4] > 0.1, "released, not braked: the car coasts on"
