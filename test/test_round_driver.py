"""The learner's round driver on its own (no ROS): how an episode that never ends is ended.

On a robot the observations stop when a sensor goes silent (the car's camera loses the road
and the track detector publishes nothing): the safety node stops the robot, and the episode
must end as failed within `observation_timeout_s`, not after the whole `episode_timeout_s`
(300 s by default) while the operator waits."""

from __future__ import annotations

import threading
import time

import numpy as np

from refine_core.rollout.plan import PlannedEpisode
from refine_core.tasks.registry import get_task
from refine_ros.loop.round_driver import RoundDriver

TASK = get_task("car_racing")


class Robot:
    """A robot that starts every episode at once (confirmed, nothing to prepare)."""

    def __init__(self, withheld: str | None = None) -> None:
        self.events: list[dict] = []
        self.withheld = withheld

    def why_silent(self):
        return self.withheld

    def await_confirmation(self, planned, round_):
        return None

    def prepare(self, planned, counter, limit, expert_labels):
        return None

    def start(self):
        return None

    def announce(self, event):
        self.events.append(event)


class Runner:
    def new_episode(self, seed: int) -> None:
        pass

    def act(self, obs):
        return np.zeros(3), []


def _drive(driver: RoundDriver, observations: int, max_steps: int = 50,
           withheld: str | None = None) -> tuple[dict, float, Robot]:
    """One episode of which `observations` steps arrive (each answered with its reward), then
    silence; returns its entry, the seconds the driver took and the robot."""
    robot = Robot(withheld)
    driver.robot = robot
    active = []

    def feed() -> None:
        while not active:
            time.sleep(0.01)
        episode = active[0]
        for step in range(observations):
            episode.on_observation(episode.counter, step, {"tiles": np.zeros((12, 4))})
            episode.on_reward(episode.counter, step, [0.0, 0.0, 0.0])
            time.sleep(0.02)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    request = {"round": 0, "run_id": 1, "max_steps": max_steps, "expert_labels": False,
               "plan": [PlannedEpisode("diagnostic", 0, 200)]}  # fmt: skip
    t0 = time.monotonic()
    entries, _ = driver.run(request, Runner(), lambda e: active.append(e) if e is not None else None,
                            threading.Event())  # fmt: skip
    feeder.join(5.0)
    return entries[0], time.monotonic() - t0, robot


def test_silent_observations_end_the_episode_as_failed_after_the_observation_timeout():
    driver = RoundDriver(TASK, Robot(), episode_timeout_s=60.0, step_budget_ends=True, observation_timeout_s=0.5)
    entry, took, robot = _drive(driver, observations=5)
    assert entry["error"] is not None and "no observation for" in entry["error"], entry
    assert "after step 4" in entry["error"], entry["error"]
    assert entry["steps"] == 5 and not entry["summary"]["complete"]
    assert took < 5.0, "ended by the observation timeout, not the episode timeout"
    assert robot.events[-1]["event"] == "end" and robot.events[-1]["complete"] is False


def test_the_error_names_the_input_the_bridge_withheld_the_observations_for():
    """On the car's twin the track detector lost the road and the episode failed with "a sensor
    or the robot's bridge went silent": the operator and the analyst could not tell which."""
    driver = RoundDriver(TASK, Robot(), episode_timeout_s=60.0, step_budget_ends=True, observation_timeout_s=0.5)
    why = "observations withheld: track/tiles (the track detector) 0.35 s old (sensor_timeout 0.15 s)"
    entry, _, _ = _drive(driver, observations=5, withheld=why)
    assert f"the bridge says: {why}" in entry["error"] and "went silent" not in entry["error"], entry["error"]


def test_an_episode_with_no_observation_at_all_is_ended_too():
    driver = RoundDriver(TASK, Robot(), episode_timeout_s=60.0, step_budget_ends=True, observation_timeout_s=0.5)
    entry, took, _ = _drive(driver, observations=0)
    assert "since the start" in entry["error"] and took < 5.0, entry


def test_without_an_observation_timeout_only_the_episode_timeout_ends_it():
    driver = RoundDriver(TASK, Robot(), episode_timeout_s=1.5, step_budget_ends=True)
    entry, took, _ = _drive(driver, observations=5)
    assert "no end of episode within 1.5 s (5 steps seen)" in entry["error"], entry
    assert took >= 1.5


def test_an_episode_that_keeps_observing_runs_to_its_step_budget():
    driver = RoundDriver(TASK, Robot(), episode_timeout_s=60.0, step_budget_ends=True, observation_timeout_s=0.5)
    entry, _, robot = _drive(driver, observations=20, max_steps=20)
    assert entry["error"] is None and entry["summary"]["complete"], entry
    assert robot.events[-1]["complete"] is True


def test_a_robots_own_episode_length_replaces_the_tasks_and_a_step_cap_still_shortens_it():
    """The owner sets how long a live episode lasts (the arm's 50 Hz and speed limit need more
    than the simulator's 500 steps); the robot's `prepare` is told that length."""
    seen = []

    class Measuring(Robot):
        def prepare(self, planned, counter, limit, expert_labels):
            seen.append(limit)
            return None

    for episode_steps, max_steps, want in ((1500, 0, 1500), (1500, 20, 20), (0, 0, TASK.spec.episode_steps)):
        driver = RoundDriver(TASK, Measuring(), episode_timeout_s=0.3, step_budget_ends=True,
                             episode_steps=episode_steps)
        request = {"round": 0, "run_id": 1, "max_steps": max_steps, "expert_labels": False,
                   "plan": [PlannedEpisode("diagnostic", 0, 200)]}  # fmt: skip
        driver.run(request, Runner(), lambda e: None, threading.Event())
        assert seen[-1] == want, (episode_steps, max_steps, seen)


def test_the_logger_records_the_failure_the_end_event_names_in_the_error_column():
    """`select error from episodes` says why a live episode failed, beside the logger's own losses."""
    from refine_ros.logger.episodes import Episode

    error = "no observation for 5.2 s after step 642: a sensor or the robot's bridge went silent"
    episode = Episode(7, end_summary={"error": error, "steps": 643}, complete=False)
    assert episode.error == error
    episode.gaps = 2
    assert episode.error == f"{error}; 2 message(s) missing from step counters (gaps)"
    assert Episode(8, end_summary={"error": None}).error is None
