"""The twin driver nodes' own interfaces, over real DDS in one process: MoveIt Servo's gate
(no motion before the switch to TWIST and the unpause), twists in the robot's base frame
moving the tool along that frame's axes in TF, the Robotiq-like gripper action and knuckle
joint, the car's /drive -> /odom, ERPM and camera; and the dropout parameters."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

from refine_ros.robots._twin.node import dropout_plans  # noqa: E402
from refine_ros.robots._twin.realtime import Window  # noqa: E402


def test_dropout_parameters_become_plans_and_bad_windows_are_refused():
    p = {"dropouts.joints.windows": [1.0, 2.0, 5.0, 5.5], "dropouts.joints.rate": 0.0,
         "dropouts.joints.mean_duration": 0.2, "dropouts.marker.windows": None, "dropouts.marker.rate": 0.5,
         "dropouts.marker.mean_duration": 0.3}
    plans = dropout_plans(p, ("joints", "marker"))
    assert plans["joints"].windows == (Window(1.0, 2.0), Window(5.0, 5.5)) and plans["joints"].rate_per_s == 0
    assert plans["marker"].windows == () and plans["marker"].rate_per_s == 0.5
    assert plans["marker"].mean_duration_s == 0.3
    quiet = {k: v for k, v in p.items() if k.startswith("dropouts.joints")} | {"dropouts.joints.windows": None}
    assert dropout_plans(quiet, ("joints",)) == {}, "no windows and no rate: no plan"
    with pytest.raises(ValueError, match="pairs"):
        dropout_plans({**p, "dropouts.joints.windows": [1.0, 2.0, 3.0]}, ("joints",))
    with pytest.raises(ValueError, match="dropouts.joints.windows"):
        dropout_plans({**p, "dropouts.joints.windows": [2.0, 1.0]}, ("joints",))


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


class _Client:
    """The bridge's side, minimally: TF into a buffer, joint states, Servo's services."""

    def __init__(self, context) -> None:
        from control_msgs.action import GripperCommand
        from geometry_msgs.msg import TwistStamped
        from moveit_msgs.srv import ServoCommandType
        from rclpy.node import Node
        from sensor_msgs.msg import JointState
        from std_srvs.srv import SetBool
        from tf2_msgs.msg import TFMessage

        from refine_ros.bringup.spin import action_client
        from refine_ros.robots.arm.tf_buffer import TfBuffer
        from refine_ros.wire import qos

        self.node = node = Node("twin_client", context=context)
        self.tf, self.joints, self.lock = TfBuffer(), {}, threading.Lock()
        node.create_subscription(TFMessage, "/tf", self._on_tf, qos.TF)
        node.create_subscription(TFMessage, "/tf_static", self._on_tf, qos.TF_STATIC)
        node.create_subscription(JointState, "/joint_states", self._on_joints, qos.SENSOR)
        self.twists = node.create_publisher(TwistStamped, "/servo_node/delta_twist_cmds", qos.COMMAND)
        self.switch = node.create_client(ServoCommandType, "/servo_node/switch_command_type")
        self.pause = node.create_client(SetBool, "/servo_node/pause_servo")
        self.gripper = action_client(node, GripperCommand, "/robotiq_gripper_controller/gripper_cmd")
        self.TwistStamped, self.ServoCommandType, self.SetBool, self.GripperCommand = (
            TwistStamped, ServoCommandType, SetBool, GripperCommand)

    def _on_tf(self, msg) -> None:
        with self.lock:
            for t in msg.transforms:
                tr, q = t.transform.translation, t.transform.rotation
                self.tf.set_transform(t.header.frame_id, t.child_frame_id, (tr.x, tr.y, tr.z), (q.x, q.y, q.z, q.w),
                                      t.header.stamp.sec + t.header.stamp.nanosec * 1e-9)

    def _on_joints(self, msg) -> None:
        with self.lock:
            self.joints = dict(zip(msg.name, msg.position, strict=False))

    def tool(self) -> np.ndarray | None:
        with self.lock:
            found = self.tf.lookup("base_link", "tool0")
        return None if found is None else np.asarray(found.transform.translation)

    def push(self, vx: float, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            msg = self.TwistStamped()
            msg.header.frame_id = "base_link"
            msg.header.stamp = self.node.get_clock().now().to_msg()
            msg.twist.linear.x = vx
            self.twists.publish(msg)
            time.sleep(0.02)

    def call(self, client, request):
        assert client.wait_for_service(timeout_sec=20.0)
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(10.0)
        return future.result()


@pytest.mark.ros
@pytest.mark.timeout(120)
def test_arm_twin_is_servo_a_gripper_and_tf_in_the_robots_base_frame(context):
    from rclpy.parameter import Parameter

    from refine_ros.bringup.spin import NodeSpinner
    from refine_ros.robots.arm.arm_twin import ArmTwinNode

    twin = ArmTwinNode(context=context, parameter_overrides=[
        Parameter("command_in_type", value="speed_units"), Parameter("gripper_action_type", value="gripper_command")])
    client = _Client(context)
    spinner = NodeSpinner([twin, *twin.companion_nodes, client.node], context).start()
    try:
        assert _wait(lambda: client.tool() is not None, 20.0), "tool0 in base_link from /tf and /tf_static"
        home = client.tool()
        assert home == pytest.approx([0.45, 0.0, 0.2], abs=0.02), "the arm's home inside arm_real's box"
        client.push(0.1, 0.5)
        assert np.linalg.norm(client.tool() - home) < 0.005, "Servo takes no twists before the switch"
        assert client.call(client.switch, client.ServoCommandType.Request(command_type=1)).success
        assert client.call(client.pause, client.SetBool.Request(data=False)).success
        client.push(0.1, 1.0)
        time.sleep(0.3)  # the command timeout halts the hand, then it stays
        moved = client.tool() - home
        assert 0.05 < moved[0] < 0.12 and abs(moved[1]) < 0.01 and abs(moved[2]) < 0.01, moved
        still = client.tool()
        time.sleep(0.3)
        assert np.linalg.norm(client.tool() - still) < 0.002, "no twist for the timeout: the hand halts"

        assert client.gripper.wait_for_server(timeout_sec=20.0)
        goal = client.GripperCommand.Goal()
        goal.command.position = 0.8  # the Robotiq knuckle's closed
        sent = client.gripper.send_goal_async(goal)
        assert _wait(lambda: sent.done(), 10.0) and sent.result().accepted
        result = sent.result().get_result_async()
        assert _wait(lambda: result.done(), 10.0)
        closed = result.result().result
        # closed on nothing the fingers end at their stop, which is the knuckle's closed limit (the
        # opening the bridge reads is 0, as on a Robotiq), not a gap the task would read as an object
        assert 0.76 <= closed.position <= 0.8 and (closed.reached_goal or closed.stalled), \
            ("fingers closed on nothing, at their stop", closed)
        knuckle = "robotiq_85_left_knuckle_joint"
        assert _wait(lambda: abs(client.joints.get(knuckle, 0.0) - closed.position) < 0.05, 5.0)
    finally:
        spinner.stop()
        client.node.destroy_node()
        twin.destroy_node()


@pytest.mark.ros
@pytest.mark.timeout(120)
def test_car_twin_drives_from_drive_and_reports_odom_erpm_and_its_camera(context):
    """F1TENTH as it ships: /odom only once a command reached the VESC, /drive only while the
    pad's RB is held (the pad's idle zero teleop holds ackermann_mux), vesc_to_odom's sign (a
    car driving forward reads negative speed), and the VESC's ERPM positive forward."""
    from ackermann_msgs.msg import AckermannDriveStamped
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from sensor_msgs.msg import Image, Joy
    from vesc_msgs.msg import VescStateStamped

    from refine_ros.bringup.spin import NodeSpinner
    from refine_ros.robots.rc_car.car_twin import CarTwinNode
    from refine_ros.wire import qos

    twin = CarTwinNode(context=context)
    node = Node("car_client", context=context)
    seen: dict[str, object] = {}
    node.create_subscription(Odometry, "/odom", lambda m: seen.__setitem__("odom", m), qos.SENSOR)
    node.create_subscription(VescStateStamped, "sensors/core", lambda m: seen.__setitem__("erpm", m), qos.SENSOR)
    node.create_subscription(Image, "/camera/image_raw", lambda m: seen.__setitem__("image", m), qos.SENSOR)
    drive = node.create_publisher(AckermannDriveStamped, "/drive", qos.COMMAND)
    pad = node.create_publisher(Joy, "/joy", qos.SENSOR)
    buttons = [0] * 12
    node.create_timer(0.05, lambda: pad.publish(Joy(axes=[0.0] * 6, buttons=list(buttons))))  # joy_node, 20 Hz
    spinner = NodeSpinner([twin, node], context).start()
    try:
        assert _wait(lambda: {"erpm", "image"} <= set(seen), 20.0), seen.keys()
        image = seen["image"]
        assert (image.width, image.height, image.encoding) == (640, 480, "bgr8") and len(image.data) == 640 * 480 * 3
        buttons[5] = 1  # RB: autonomy
        time.sleep(0.5)
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            cmd = AckermannDriveStamped()
            cmd.drive.speed = 0.5
            drive.publish(cmd)
            time.sleep(0.02)
        odom, erpm = seen["odom"], seen["erpm"]
        assert -0.7 < odom.twist.twist.linear.x < -0.3 and odom.pose.pose.position.x < -0.3, \
            "vesc_to_odom's speed is (-ERPM - offset) / gain: forward reads negative"
        assert erpm.state.speed == pytest.approx(-4614.0 * odom.twist.twist.linear.x, rel=0.25)
    finally:
        spinner.stop()
        node.destroy_node()
        twin.destroy_node()
