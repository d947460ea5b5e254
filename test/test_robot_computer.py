"""A robot's computer needs no simulator: the nodes a real profile runs on it (its bridge, the
safety node, the learner, the logger and the analyst) import and start with MuJoCo, Meta-World
and Box2D made unimportable, in a process of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from refine_core.rollout.demo import recorded_demonstration, teleop_source
from refine_core.store.db import RunDatabase
from refine_core.tasks.registry import get_task

SIMULATORS = ("mujoco", "metaworld", "Box2D", "gymnasium.envs.box2d")

CHILD = textwrap.dedent('''
    import importlib, json, sys

    BLOCKED = tuple(json.loads(sys.argv[1]))

    class NoSimulator:
        """A meta-path finder that refuses the simulators, as on a robot without them."""

        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ImportError(f"{name} is not installed on this robot computer")
            return None

    sys.meta_path.insert(0, NoSimulator())

    import rclpy
    from rclpy.parameter import Parameter

    from refine_ros.bringup import resolve_profile

    profile, run_dir, extra = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    context = rclpy.Context()
    rclpy.init(context=context)
    started = []
    for spec in resolve_profile(profile, {"run_dir": run_dir}).nodes:
        params = {**spec.parameters, **extra.get(spec.name, {})}
        cls = getattr(importlib.import_module(spec.module), spec.class_name)
        node = cls(context=context, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        started.append(spec.name)
        node.destroy_node()
    rclpy.shutdown(context=context)
    print(json.dumps({"started": started, "loaded": [m for m in BLOCKED if m in sys.modules]}))
''')


def _demonstration(run_dir, task_name: str, robot: str) -> None:
    """A teleoperated demonstration on `robot` (the learner of a real profile needs one)."""
    task = get_task(task_name)
    spec = task.spec
    rng = np.random.default_rng(0)
    steps = 30
    observations = rng.normal(0.0, 0.1, (steps + 1, len(spec.observation_columns)))
    actions = np.clip(rng.normal(0.0, 0.3, (steps, len(spec.action_names))), 0.0, 1.0)
    demo = recorded_demonstration(task, observations, actions, source=teleop_source(robot),
                                  columns=spec.observation_columns)
    with RunDatabase(run_dir) as db:
        demo.save(db, db.create_run(task_name))


@pytest.mark.ros
@pytest.mark.timeout(180)
@pytest.mark.parametrize("profile, task", [("arm_real", "door_open"), ("rc_car_real", "car_racing")])
def test_a_real_profiles_nodes_start_without_any_simulator(run_dir, profile, task):
    """Issue 16: "The bridges import the simulators (`rc_car_bridge` pulls in gymnasium Box2D):
    the robot's computer needs the whole simulation stack". Every node of the profile starts
    here with the simulators blocked, and none of them is loaded."""
    _demonstration(run_dir, task, profile)
    extra = {"rc_car_bridge": {"command_type": "twist", "wheelbase": 0.33, "wheel_source": "encoders",
                               "wheel_radius": 0.05}}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(SIMULATORS), profile, str(run_dir), json.dumps(extra)],
        capture_output=True, text=True, timeout=150, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["loaded"] == []
    assert {"safety_node", "learner_node", "rollout_logger", "analysis_node"} <= set(report["started"])
    assert ("arm_bridge" if profile == "arm_real" else "rc_car_bridge") in report["started"]


def test_the_blocker_really_blocks():
    """The finder used above refuses what it must: without it the check would prove nothing."""
    code = CHILD.split("import rclpy")[0] + "\nimport gymnasium.envs.box2d\n"
    done = subprocess.run([sys.executable, "-c", code, json.dumps(SIMULATORS)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0 and "not installed on this robot computer" in done.stderr
