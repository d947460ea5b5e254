"""The teleoperator of the twins: a person (tools/twin_person.py) at a robot's physics twin,
with the robot's gamepad in hand, for the measured twin runs (tools/twin_story.py) and the
tests. Not a product feature: the product's path is what it drives.

What it does, as a person at the robot does it:

- records takes through the real path: `sensor_msgs/Joy` on `/joy` in the gamepad layout the
  profile's `joy_teleop` reads (the arm: the SDL layout of game_controller_node; the car:
  F1TENTH's F710 layout, RB the dead-man), dead-man held while driving, the recorder's own
  buttons for start, stop, the success / failure label, keep, discard and re-record; the scene
  put back (the twin's `~/reset`) in the recorder's reset phase. It judges each attempt by what
  it sees: a hook that came off the handle, a hand stuck, a car off the road or stopped (its
  camera lost the road) is recorded again at once (re-record); a take that ended but was poor (too slow for an episode, on the grass) is
  labelled a failure and discarded; a good one is labelled a success and kept.
- watches live episodes (refinement and evaluation): resets the twin after each, confirms the
  next one (`safety/confirm_episode`), confirms again when the robot was stopped mid-episode,
  holds the autonomy dead-man where the profile's safety node asks for one, and gives its verdict
  on each episode (`logger/label_episode`) from what it saw.
- sees the twin's scene (`/<twin>/scene`, `/<twin>/scene_layout`: refine_ros/robots/_twin/
  scene.py), which no node of the robot's graph reads, and keeps the ground-truth figures of
  every live episode (`EpisodeTruth`): door angle reached, the smallest handle-target distance,
  opened; tiles covered, lap closed, lap time.

It never writes to the run database: what reaches it goes through the recorder and the
logger's services, as a person's buttons do.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from twin_person import DoorSkill, Eyes, Hands, Intent, LapSkill, Pad, PersonConfig

TICK_S = 0.02
"""The gamepad's publishing period (joy_node's autorepeat is 20 Hz or more; 50 Hz here)."""
PRESS_S = 0.12
"""How long a button press is held down (joy_teleop acts on the rising edge)."""


@dataclass
class RobotSetup:
    """What the operator needs to know about the robot: its twin, task, pad and limits, all
    from its descriptor and profiles."""

    robot: str
    profile: str
    twin: str
    task: str
    pad: Pad
    live_deadman: int
    """The button the profile's safety node wants held for policy commands (-1: none)."""
    limits: dict[str, float]
    episode_steps: int

    @classmethod
    def of(cls, robot: str) -> RobotSetup:
        from refine_core.tasks.registry import get_task
        from refine_ros.bringup import resolve_profile
        from refine_ros.robots.registry import get_robot
        from refine_ros.teleop.maps import standard_joy_map

        described = get_robot(robot)
        spec = get_task(described.task).spec
        record = resolve_profile(f"{described.profile}_record_demo", check_modules=False)
        real = resolve_profile(described.profile, check_modules=False)
        pad = Pad.from_joy_teleop(record.node("joy_teleop").parameters, standard_joy_map(spec))
        safety = real.node("safety_node").parameters
        bridge = real.node(described.bridge).parameters
        limits = {k: float(bridge[k]) for k in ("max_speed", "max_steering_angle") if k in bridge}
        steps = int(real.node("learner_node").parameters.get("episode_steps", 0)) or spec.episode_steps
        return cls(robot, described.profile, described.twin, described.task, pad,
                   int(safety.get("deadman_button", -1)), limits, steps)


@dataclass
class EpisodeTruth:
    """One live episode as the twin's ground truth saw it (none of it reaches the robot's graph)."""

    episode: int
    kind: str
    round: int | None
    seed: int | None
    started: float
    ended: float | None = None
    success: bool = False
    figures: dict[str, float] = field(default_factory=dict)
    confirmations: int = 0
    """Times the operator confirmed this episode again after the robot had been stopped in it."""
    label: str = ""


class Figures:
    """The task's ground-truth figures over one episode's scenes."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.values: dict[str, float] = {}
        self.start: float | None = None

    def add(self, scene: dict, now: float) -> None:
        v = self.values
        if self.start is None:
            self.start = now
        if self.task == "door_open":
            v["door_angle_reached"] = max(v.get("door_angle_reached", 0.0), -float(scene["door_angle"]))
            v["min_handle_target_distance"] = min(v.get("min_handle_target_distance", math.inf),
                                                  float(scene["handle_target_distance"]))
            if scene["opened"] and "opened_after_s" not in v:
                v["opened_after_s"] = now - self.start
            v["opened"] = float(bool(scene["opened"]) or v.get("opened", 0.0) > 0)
        else:
            v["tiles_covered"] = max(v.get("tiles_covered", 0.0), scene["tiles_visited"] / max(1, scene["tiles"]))
            v["max_off_centre_m"] = max(v.get("max_off_centre_m", 0.0), float(scene["off_centre"]))
            if scene["lap"] and "lap_time_s" not in v:
                v["lap_time_s"] = now - self.start
            v["lap"] = float(bool(scene["lap"]) or v.get("lap", 0.0) > 0)

    def success(self) -> bool:
        return bool(self.values.get("opened" if self.task == "door_open" else "lap", 0.0))


class Operator:
    """The person and the gamepad, as one rclpy node spun on a thread of its own."""

    def __init__(self, robot: str, seed: int = 0, person: PersonConfig | None = None,
                 fumbles: tuple[int, ...] = (), log=print, until_tiles: int = 0) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.node import Node
        from sensor_msgs.msg import Joy
        from std_msgs.msg import String
        from std_srvs.srv import SetBool, Trigger

        from refine_core.tasks.registry import get_task
        from refine_ros.bringup.spin import NodeSpinner
        from refine_ros.robots._twin.scene import LAYOUT_QOS, SCENE_QOS
        from refine_ros.wire import qos

        self.setup = setup = RobotSetup.of(robot)
        self.spec = get_task(setup.task).spec
        self.log = log
        self.rng = np.random.default_rng(seed)
        self.person = person or PersonConfig()
        self.fumbles = set(fumbles)
        """Attempts (0-based) in which the person fumbles: misses the handle, or looks away in a bend."""
        self.until_tiles = until_tiles
        """The car: a short take, ended once this many tiles are visited (0: the whole lap)."""
        self.take_figures: Figures | None = None
        """The ground truth of the take being driven (what the twin's scene shows)."""
        self.Joy, self.Trigger, self.SetBool = Joy, Trigger, SetBool
        self.lock = threading.Lock()
        self.scene: dict | None = None
        self.layout: dict | None = None
        self.recorder: dict = {}
        self.safety: dict[str, str] = {}
        self.mode = "idle"  # idle | drive | live
        self.skill: Any = None
        self.eyes = Eyes(self.person, self.rng)
        self.hands = Hands(self.person, self.rng, len(self.spec.actions))
        self.intent: Intent | None = None
        self.pressed: dict[int, float] = {}
        self.axes = [0.0] * setup.pad.n_axes
        self.events: list[dict] = []
        self.truths: list[EpisodeTruth] = []
        self.current: tuple[EpisodeTruth, Figures] | None = None

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = node = Node("twin_operator", context=self.context)
        self.pub_joy = node.create_publisher(Joy, "/joy", qos.SENSOR)
        node.create_subscription(String, f"/{setup.twin}/scene", self._on_scene, SCENE_QOS)
        node.create_subscription(String, f"/{setup.twin}/scene_layout", self._on_layout, LAYOUT_QOS)
        node.create_subscription(String, "demo/status", self._on_recorder, qos.LATCHED)
        node.create_subscription(String, "refine/episode_events", self._on_event, qos.LATCHED)
        node.create_subscription(DiagnosticArray, "safety/status", self._on_safety, qos.STATE)
        self.reset_client = node.create_client(Trigger, f"/{setup.twin}/reset")
        self.confirm_client = node.create_client(Trigger, "safety/confirm_episode")
        self.label_client = node.create_client(SetBool, "logger/label_episode")
        node.create_timer(TICK_S, self._tick)
        self.spinner = NodeSpinner([node], self.context).start()

    # ---- eyes ---------------------------------------------------------------------------------
    def _on_scene(self, msg) -> None:
        scene = json.loads(msg.data)
        now = time.monotonic()
        with self.lock:
            self.scene = scene
            self.eyes.look(now, scene)
            if self.current is not None:
                self.current[1].add(scene, now)
            if self.take_figures is not None:
                self.take_figures.add(scene, now)

    def _on_layout(self, msg) -> None:
        with self.lock:
            self.layout = json.loads(msg.data)

    def _on_recorder(self, msg) -> None:
        with self.lock:
            self.recorder = json.loads(msg.data)

    def _on_safety(self, msg) -> None:
        for status in msg.status:
            fields = {kv.key: kv.value for kv in status.values}
            if "confirm_pending" in fields:
                with self.lock:
                    self.safety = fields

    def _on_event(self, msg) -> None:
        event = json.loads(msg.data)
        now = time.monotonic()
        with self.lock:
            self.events.append(event)
            if event.get("event") == "start":
                truth = EpisodeTruth(int(event.get("episode", -1)), str(event.get("kind", "")),
                                     event.get("round"), event.get("seed"), now)
                figures = Figures(self.setup.task)
                if self.scene is not None:
                    figures.add(self.scene, now)
                self.current = (truth, figures)
            elif event.get("event") == "end" and self.current is not None:
                truth, figures = self.current
                truth.ended, truth.success, truth.figures = now, figures.success(), dict(figures.values)
                self.truths.append(truth)
                self.current = None

    # ---- hands --------------------------------------------------------------------------------
    def press(self, control: str) -> None:
        """Press one of the recorder's buttons (as the profile's joy_teleop maps them)."""
        button = self.setup.pad.buttons[control]
        if button < 0:
            raise RuntimeError(f"the pad has no {control} button")
        with self.lock:
            self.pressed[button] = time.monotonic() + PRESS_S
        time.sleep(PRESS_S + 2 * TICK_S)

    def _tick(self) -> None:
        now = time.monotonic()
        pad, spec = self.setup.pad, self.spec
        with self.lock:
            held = set()
            axes = [float(pad.rest_axes.get(i, 0.0)) for i in range(pad.n_axes)]
            if self.mode == "drive" and self.skill is not None:
                seen = self.eyes.scene(now)
                if seen is not None:
                    self.intent = intent = self.skill.intent(seen, now)
                    if not (intent.done or intent.failed):
                        action, deadman = self.hands.move(intent.action, now, *self.skill_masks())
                        axes = pad.sticks(action, spec.action_low, spec.action_high)
                        if deadman:
                            held.add(pad.enable_button)
                    elif intent.done:
                        axes = pad.sticks(intent.action, spec.action_low, spec.action_high)
                        held.add(pad.enable_button)
            elif self.mode == "live" and self.setup.live_deadman >= 0:
                held.add(self.setup.live_deadman)
            held |= {b for b, until in self.pressed.items() if now < until}
            self.pressed = {b: u for b, u in self.pressed.items() if now < u}
        buttons = [1 if i in held else 0 for i in range(pad.n_buttons)]
        msg = self.Joy(axes=[float(a) for a in axes], buttons=buttons)
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.pub_joy.publish(msg)

    def skill_masks(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Which actions a thumb holds on a stick (noisy), and which a pause lets go of."""
        if self.setup.task == "door_open":  # dx, dy, dz on sticks; the gripper on a trigger
            return np.array([True, True, True, False]), np.array([True, True, True, False])
        return np.array([True, True, True]), np.array([False, True, False])  # a driver lifts off the gas

    # ---- services -----------------------------------------------------------------------------
    def call(self, client, request, timeout: float = 10.0):
        from refine_ros.bringup.spin import call_service

        return call_service(client, request, timeout)

    def reset_scene(self) -> str:
        """Put the door back closed and the arm home, or the car on its start line, as a
        person does by hand between takes and episodes."""
        answer = self.call(self.reset_client, self.Trigger.Request(), timeout=30.0)
        with self.lock:
            self.eyes.seen.clear()
            self.scene = None
        return answer.message

    def wait_for(self, what, timeout: float, every: float = 0.05) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if what():
                return True
            time.sleep(every)
        return False

    # ---- recording ----------------------------------------------------------------------------
    def _new_skill(self, attempt: int) -> Any:
        fumble = attempt in self.fumbles
        if self.setup.task == "door_open":
            skill = DoorSkill(self.setup.limits.get("max_speed", 0.1))
            if fumble:  # goes down beside the handle, closes on nothing, pulls: the handle stays
                skill.miss = np.array([0.0, 0.0, 0.035])
            return skill
        if not self.wait_for(lambda: self.layout is not None, 30.0):
            raise RuntimeError(f"no track layout on /{self.setup.twin}/scene_layout")
        skill = LapSkill(self.layout, max_speed=self.setup.limits.get("max_speed", 1.0),
                         max_steering_angle=self.setup.limits.get("max_steering_angle", 0.34),
                         until_tiles=self.until_tiles)
        if fumble:  # looks away at the first bend: the steering held still for a while
            skill.distracted = (6.0, 1.6)
        return skill

    def record(self, keep: int = 1, attempts: int = 8, reset_time: float = 4.0, take_limit_s: float | None = None
               ) -> list[dict]:
        """Record until `keep` takes are kept (the recorder's `takes`), at most `attempts`
        attempts; each attempt's outcome as a dict (what the person did and why)."""
        limit = take_limit_s or self.setup.episode_steps * 0.02
        attempts_made: list[dict] = []
        if not self.wait_for(lambda: self.pub_joy.get_subscription_count() > 0, 120.0):
            raise RuntimeError("nothing reads /joy: is the record profile up?")
        if not self.wait_for(lambda: self.scene is not None, 60.0):
            raise RuntimeError(f"no scene on /{self.setup.twin}/scene: is the twin up?")
        time.sleep(1.0)
        def state() -> str:
            return self.recorder.get("state", "")

        for attempt in range(attempts):
            if not self.wait_for(lambda: state() in ("idle", "recording", "finished"), 60.0):
                raise RuntimeError(f"the recorder never became ready: {self.recorder}")
            if state() == "finished":
                break
            if state() == "idle":  # the first take, or one that did not start by itself
                if not self.wait_for(lambda: (self.press("start"), state() == "recording")[1], 60.0, every=1.0):
                    raise RuntimeError(f"the take did not start: {self.recorder.get('message')}")
            outcome = self._drive_take(attempt, limit)
            attempts_made.append(outcome)
            self.log(f"[operator] attempt {attempt}: {outcome['decision']} ({outcome['why']}) after "
                     f"{outcome['seconds']} s; the twin's ground truth: {outcome['truth']}")
            if outcome["decision"] == "rerecord":
                self.press("rerecord")
            else:
                self.press("stop")
                if not self.wait_for(lambda: state() in ("stopped", "idle"), 10.0) or state() != "stopped":
                    outcome["decision"], outcome["why"] = "refused", self.recorder.get("message", "")
                    self.log(f"[operator] the recorder refused the take: {outcome['why']}")
                    self.log(f"[operator] scene reset: {self.reset_scene()}")
                    continue
                outcome["steps"] = int(self.recorder.get("steps", 0))
                self.press("success" if outcome["decision"] == "keep" else "failure")
                self.press("keep" if outcome["decision"] == "keep" else "discard")
            if not self.wait_for(lambda: state() in ("reset", "finished"), 10.0):
                raise RuntimeError(f"the recorder did not take the {outcome['decision']}: {self.recorder}")
            if state() == "finished":
                break
            time.sleep(0.5)
            self.log(f"[operator] scene reset: {self.reset_scene()}")  # what a later take starts from
        return attempts_made

    def _drive_take(self, attempt: int, limit_s: float) -> dict:
        """Drive one take to its end; the person's decision (keep, discard or rerecord), why,
        and what the twin's ground truth saw of it (`truth`, which only this tool reads)."""
        with self.lock:
            self.skill = self._new_skill(attempt)
            self.intent = None
            self.hands = Hands(self.person, self.rng, len(self.spec.actions))
            self.take_figures = Figures(self.setup.task)
            self.mode = "drive"
        t0 = time.monotonic()
        try:
            outcome = self._until_done(t0, limit_s)
        finally:
            with self.lock:
                self.mode = "idle"
                truth, self.take_figures = self.take_figures, None
        took = time.monotonic() - t0
        outcome.update(seconds=round(took, 1), pauses=self.hands.pauses, phase=getattr(self.skill, "phase", None),
                       truth={k: round(v, 4) for k, v in truth.values.items()})
        if outcome["decision"] != "done":
            return outcome
        if took > limit_s:  # a policy fitted to it would not finish within a live episode
            return {**outcome, "decision": "discard", "why": f"done, but in {took:.1f} s: slower than an episode"}
        road = (self.layout or {}).get("road_width", 0.3) / 2.0
        worst_off = truth.values.get("max_off_centre_m", 0.0)
        if self.setup.task != "door_open" and worst_off > road:
            return {**outcome, "decision": "discard", "why": f"done, but {worst_off - road:.2f} m onto the grass"}
        return {**outcome, "decision": "keep", "why": "done"}

    def _until_done(self, t0: float, limit_s: float) -> dict:
        while True:
            time.sleep(TICK_S)
            with self.lock:
                intent = self.intent
            took = time.monotonic() - t0
            if intent is not None and intent.failed:
                return {"decision": "rerecord", "why": intent.failed}
            if intent is not None and intent.done:
                time.sleep(0.4)  # sees it done, lets go of the sticks
                return {"decision": "done"}
            if took > 3 * limit_s:
                return {"decision": "rerecord", "why": f"not done after {took:.0f} s"}

    # ---- live episodes ------------------------------------------------------------------------
    def watch_episodes(self, process, timeout_s: float = 7200.0, stalled_s: float = 1.0) -> None:
        """Serve a refinement or evaluation run's live episodes until `process` ends: reset the
        scene after each episode and judge it, confirm the next, confirm again when the robot
        was stopped mid-episode."""
        with self.lock:
            self.mode = "live"
        seen_ends, unconfirmed_since = 0, None
        ready = True  # the scene was put back (the twin starts reset)
        deadline = time.monotonic() + timeout_s
        try:
            while process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
                with self.lock:
                    truths, running, safety = list(self.truths), self.current, dict(self.safety)
                if len(truths) > seen_ends:
                    for truth in truths[seen_ends:]:
                        self._verdict(truth)
                    seen_ends = len(truths)
                    time.sleep(0.5)
                    self.reset_scene()
                    ready = True
                pending = safety.get("confirm_pending") == "True"
                # confirm once the scene is back, and again when the safety node dropped a
                # confirmation before its episode began (the bridge stopped the car meanwhile)
                revoked = safety.get("confirmed_episode") == "None" and not pending
                if running is None and (ready or revoked) and not pending and self.confirm_client.service_is_ready():
                    if self.call(self.confirm_client, self.Trigger.Request()).success:
                        ready = False
                elif running is not None and not pending and safety.get("state") == "unconfirmed":
                    unconfirmed_since = unconfirmed_since or time.monotonic()
                    if time.monotonic() - unconfirmed_since > stalled_s:  # the robot stopped: look, confirm again
                        if self.call(self.confirm_client, self.Trigger.Request()).success:
                            running[0].confirmations += 1
                        unconfirmed_since = None
                else:
                    unconfirmed_since = None
                if running is not None:
                    ready = False
        finally:
            with self.lock:
                self.mode = "idle"

    def _verdict(self, truth: EpisodeTruth) -> None:
        """What the person saw: a success or a failure, given to the logger as the episode's label."""
        truth.label = "success" if truth.success else "failure"
        try:
            answer = self.call(self.label_client, self.SetBool.Request(data=truth.success))
            if not answer.success:
                truth.label += f" (not stored: {answer.message})"
        except RuntimeError as exc:
            truth.label += f" (not stored: {exc})"
        figures = ", ".join(f"{k} {v:.3g}" for k, v in truth.figures.items())
        self.log(f"[operator] {truth.kind} episode {truth.episode} (round {truth.round}): {truth.label}; {figures}")

    def truth_records(self) -> list[dict]:
        with self.lock:
            return [asdict(t) for t in self.truths]

    def close(self) -> None:
        import rclpy

        self.spinner.stop()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def write_truths(path: Path, truths: list[dict]) -> None:
    path.write_text("".join(json.dumps(t) + "\n" for t in truths))
