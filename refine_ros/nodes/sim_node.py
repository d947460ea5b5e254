"""Sim node: any registered task's simulator (MuJoCo door, Box2D car, pendulum...) behind
ROS topics. It asks the task for everything task-specific (env, expert, scene, static shapes,
camera) and never which task it holds.

Two ways to keep time, chosen by `real_time`:
- lockstep (default, as fast as the policy answers): each observation carries its (episode,
  step) counters and the simulator steps only when the action for exactly that step arrives,
  so a slow policy never sees a stale state and a run is reproducible;
- real time: a timer steps at `rate_hz` with the newest action (zero motion before the first),
  the way a robot would behave under a late policy.

Per step it publishes the counted observation (`refine/observation`), the counted
`[reward, done, success]` for the step just taken (`refine/reward`), the expert's action for
the new state (`refine/expert_action`, so rollout tables carry expert labels as in
refine_core), the typed topics of the task's scene (`Task.scene`, named by
refine_ros.viewers.scene_topics and created at start from a scene of a first reset), and, rate-limited,
RViz markers (the scene's shapes and trail; the task's static shapes every few seconds) and an
offscreen camera image. `sim/reset` resets with the `seed` parameter (and the
`episode` parameter, if set, as the episode counter) and publishes the first observation
before it answers. Episode events: `{"event": "reset", ...}` and `{"event": "end", ...}` with
the task's episode summary (return, metric, success).

QoS: the logged step streams (observation, reward, expert action) CONTROL, so the writer keeps
every sample until the rollout logger has it; typed scene topics STATE; column names and
episode events LATCHED; actions are read COMMAND (lockstep waits for exactly one, real time
wants the newest); markers and camera SENSOR.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger
from visualization_msgs.msg import MarkerArray

from refine_core.rollout.schema import RolloutSchema
from refine_core.tasks import get_task, task_names
from refine_core.tasks.scene import Scene
from refine_core.tasks.view import TaskView
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, declare_parameters
from refine_ros.viewers import markers
from refine_ros.wire import adapters, qos
from refine_ros.wire.messages import REWARD_NAMES, pack_json, pack_step, unpack_vector
from refine_ros_interfaces.msg import Step

STATIC_REPUBLISH_S = 2.0  # static shapes (the car track) are big and fixed: re-sent for late RViz windows


PARAMETERS: dict[str, Param] = {
    "task": Param("door_open", "registered task (refine tasks lists them)"),
    "seed": Param(0, "seed of the next sim/reset (fixes the door / track)", (0, 2**31 - 1), read_only=False),
    "episode": Param(-1, "episode counter for the next reset; -1 counts up by itself", (-1, 2**31 - 1),
                     read_only=False),
    "max_steps": Param(0, "end episodes after this many steps; 0 = the task's length", (0, 1_000_000),
                       read_only=False),
    "real_time": Param(False, "step at rate_hz with the newest action (else lockstep)"),
    "rate_hz": Param(50.0, "simulation rate in real-time mode", (1.0, 1000.0)),
    "publish_markers": Param(True, "publish refine/markers for RViz", read_only=False),
    "marker_rate_hz": Param(10.0, "most marker updates per second", (0.1, 100.0), read_only=False),
    "publish_expert": Param(False, "publish the expert's action per state (expert_* columns; privileged, off "
                            "unless the analysis node asks)", read_only=False),
    "publish_camera": Param(False, "render refine/camera offscreen (MUJOCO_GL=osmesa)"),
    "camera_width": Param(320, "camera image width", (16, 1920)),
    "camera_height": Param(240, "camera image height", (16, 1080)),
    "camera_rate_hz": Param(10.0, "most camera frames per second", (0.1, 60.0), read_only=False),
    "frame_id": Param("world", "fixed frame of poses and markers"),
}


class SimNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("sim_node", **kwargs)
        declare_parameters(self, PARAMETERS)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        task_name = self._p("task")
        if task_name not in task_names():
            super().destroy_node()
            raise ValueError(f"sim_node: unknown task {task_name!r}; choose one of {', '.join(task_names())}")
        self.task = get_task(task_name)
        self.view = TaskView(self.task)
        self.spec = self.task.spec
        self.frame_id = self._p("frame_id")
        self._camera_size = (int(self._p("camera_width")), int(self._p("camera_height")))
        self.env = self._make_env(bool(self._p("publish_camera")))
        self.expert = self.task.expert(self.env)
        self._low, self._high = self.spec.action_low.astype(float), self.spec.action_high.astype(float)
        self._zero = np.clip(np.zeros(len(self._low)), self._low, self._high)

        # episode state
        self.episode = -1
        self.step_index = 0
        self.active = False
        self.latest_action: np.ndarray | None = None
        self.ignored_actions = 0
        self.steps_taken = 0
        self._obs: Any = None
        self._observations: list[Any] = []
        self._rewards: list[float] = []
        self._infos: list[dict] = []
        self._trail = markers.Trail()
        self._static_shapes: tuple = ()
        self._last_marker = self._last_camera = self._last_static = -1e9

        self._obs_pub = self.create_publisher(Step, "refine/observation", qos.CONTROL)
        self._reward_pub = self.create_publisher(Step, "refine/reward", qos.CONTROL)
        self._expert_pub = self.create_publisher(Step, "refine/expert_action", qos.CONTROL)
        self._expert_names = RolloutSchema.for_task(self.spec).expert_columns()
        self._events_pub = self.create_publisher(String, "refine/episode_events", qos.LATCHED)
        self._columns_pub = self.create_publisher(String, "refine/observation_columns", qos.LATCHED)
        self._typed_pubs: dict[str, Any] = {}
        self._create_typed_publishers(self._first_scene())
        self._marker_pub = self.create_publisher(MarkerArray, "refine/markers", qos.SENSOR)
        self._camera_pub = self.create_publisher(Image, "refine/camera", qos.SENSOR)
        self.create_subscription(Float64MultiArray, "refine/action", self._on_action, qos.COMMAND)
        self.create_service(Trigger, "sim/reset", self._on_reset)
        self._columns_pub.publish(pack_json(list(self.spec.observation_columns)))
        if self._p("real_time"):
            self.create_timer(1.0 / float(self._p("rate_hz")), self._on_tick)
        mode = f"real time at {self._p('rate_hz'):g} Hz" if self._p("real_time") else "lockstep"
        self.get_logger().info(f"{task_name} simulator ready ({mode}); call sim/reset to start")

    # -- setup ----------------------------------------------------------------------------------
    def _p(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _make_env(self, camera: bool):
        if not camera:
            return self.task.make_env()
        os.environ.setdefault("MUJOCO_GL", "osmesa")
        width, height = self._camera_size
        return self.view.make_camera_env(width, height)

    def _first_scene(self) -> Scene:
        """A scene of the configured seed, so every typed topic has a publisher (and
        subscribers time to match) before the first episode's first message."""
        self.env.reset(seed=int(self._p("seed")))
        return self.view.scene(self.env)

    def _create_typed_publishers(self, scene: Scene) -> None:
        for topic, kind in adapters.topic_types(scene).items():
            if topic not in self._typed_pubs:
                self._typed_pubs[topic] = self.create_publisher(kind, topic, qos.STATE)

    def _on_set_parameters(self, params) -> SetParametersResult:
        for p in params:
            if p.name == "task" and p.value not in task_names():
                return SetParametersResult(successful=False,
                                           reason=f"task must be one of {', '.join(task_names())}")
        return SetParametersResult(successful=True)

    # -- episode control ----------------------------------------------------------------------
    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        seed = int(self._p("seed"))
        wanted = int(self._p("episode"))
        try:
            obs, info = self.env.reset(seed=seed)
        except Exception as exc:  # a broken simulator state is reported, not fatal
            response.success, response.message = False, f"reset failed: {exc}"
            return response
        if self.active:
            self._publish_event("end", complete=False, reason="reset before the episode ended")
        self.episode = wanted if wanted >= 0 else self.episode + 1
        self.step_index = 0
        self.active = True
        self.latest_action = None
        self._obs = obs
        self._observations, self._rewards, self._infos = [obs], [], []
        self._trail.clear()
        self._static_shapes = self.view.static_shapes(self.env)
        self._last_static = -1e9
        self._publish_event("reset", seed=seed)
        self._publish_observation(done=False)
        response.success = True
        response.message = pack_json({"episode": self.episode, "seed": seed}).data
        return response

    def _max_steps(self) -> int:
        cap = int(self._p("max_steps"))
        return min(cap, self.spec.episode_steps) if cap > 0 else self.spec.episode_steps

    def _on_action(self, msg: Float64MultiArray) -> None:
        try:
            vec = unpack_vector(msg)
        except ValueError:
            self.ignored_actions += 1
            return
        values = np.asarray(vec.values, dtype=float)
        if values.shape != self._low.shape or not np.all(np.isfinite(values)):
            self.ignored_actions += 1
            self.get_logger().warn(
                f"ignored action {list(vec.values)}: need {len(self._low)} finite values",
                throttle_duration_sec=2.0,
            )
            return
        if self._p("real_time"):
            self.latest_action = values
            return
        if not self.active or (vec.episode, vec.step) != (self.episode, self.step_index):
            self.ignored_actions += 1  # stale, early or for another episode
            return
        self._step(values)

    def _on_tick(self) -> None:
        if self.active:
            self._step(self.latest_action if self.latest_action is not None else self._zero)

    def _step(self, action: np.ndarray) -> None:
        action = np.clip(action, self._low, self._high)
        obs, reward, terminated, truncated, info = self.env.step(action.astype(np.float32))
        acted_on = self.step_index
        self.step_index += 1
        self.steps_taken += 1
        self._obs = obs
        self._observations.append(obs)
        self._rewards.append(float(reward))
        self._infos.append(dict(info))
        done = bool(terminated or truncated or self.step_index >= self._max_steps())
        success = float(info.get("success", 0.0) or 0.0)
        self._reward_pub.publish(pack_step(self.episode, acted_on, REWARD_NAMES, [float(reward), float(done), success],
                                           self.get_clock().now().to_msg()))
        self._publish_observation(done=done)
        if done:
            self.active = False
            self._publish_event("end", complete=True)

    # -- publishing --------------------------------------------------------------------------------
    def _publish_event(self, event: str, **fields: Any) -> None:
        payload: dict[str, Any] = {"event": event, "episode": self.episode, "source": "sim",
                                   "task": self.spec.name, **fields}
        if event == "end" and self._rewards:
            summary = self.task.episode_summary(self._observations, self._rewards, self._infos)
            payload.update({k: float(v) for k, v in summary.items()})
        self._events_pub.publish(pack_json(payload))

    def _publish_observation(self, done: bool) -> None:
        parts = self.task.split_observation(self._obs)
        values = adapters.observation_values(self.spec, parts)
        stamp = self.get_clock().now().to_msg()
        self._obs_pub.publish(pack_step(self.episode, self.step_index, self.spec.observation_columns, values, stamp))
        if not done and self._p("publish_expert"):
            expert = np.asarray(self.expert(self._obs), dtype=float)
            self._expert_pub.publish(pack_step(self.episode, self.step_index, self._expert_names, expert.tolist(), stamp))
        scene = self.view.scene(self.env)
        typed = adapters.scene_messages(scene, stamp, self.frame_id)
        if typed.keys() - self._typed_pubs.keys():  # a task whose scene grew: publish it too
            self._create_typed_publishers(scene)
        for topic, msg in typed.items():
            self._typed_pubs[topic].publish(msg)
        now = time.monotonic()
        if self._p("publish_markers"):
            if scene.trail is not None:
                self._trail.add(scene.trail)
            if done or now - self._last_marker >= 1.0 / float(self._p("marker_rate_hz")):
                self._last_marker = now
                self._publish_markers(scene, stamp, now)
        if self._p("publish_camera") and (
            done or self.step_index == 0 or now - self._last_camera >= 1.0 / float(self._p("camera_rate_hz"))
        ):
            self._last_camera = now
            self._publish_camera(stamp)

    def _publish_markers(self, scene: Scene, stamp, now: float) -> None:
        if self._static_shapes and now - self._last_static >= STATIC_REPUBLISH_S:
            self._last_static = now
            self._marker_pub.publish(markers.shape_markers(self._static_shapes, stamp, self.frame_id))
        if scene.shapes or scene.trail is not None:
            self._marker_pub.publish(markers.scene_markers(scene, self._trail, stamp, self.frame_id))

    def _publish_camera(self, stamp) -> None:
        try:
            frame = self.env.render()
        except Exception as exc:  # no GL context: say so once, keep simulating
            self.get_logger().error(f"camera disabled: render failed: {exc}", once=True)
            return
        if frame is None:
            return
        frame = np.ascontiguousarray(frame[..., :3], dtype=np.uint8)
        width, height = self._camera_size
        if frame.shape[1] != width or frame.shape[0] != height:
            import cv2

            frame = cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA)
        img = Image(height=height, width=width, encoding="rgb8", is_bigendian=0, step=3 * width)
        img.header.stamp = stamp
        img.header.frame_id = self.view.camera_frame or self.frame_id
        img.data = frame.tobytes()
        self._camera_pub.publish(img)

    def destroy_node(self) -> None:
        try:
            env = getattr(self, "env", None)
            if env is not None:
                env.close()
        finally:
            super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run_node(SimNode, args)


if __name__ == "__main__":
    main()
