"""The task contract, checked for every registered task: a task is one folder listed in one
line of the registry, its env passes Gymnasium's checker and documents itself in Gymnasium's
sections, its expert acts inside the action space, its scene is stable from step to step and
agrees with what a logged row alone says, its starter program builds under the contract, and
its diagnostic features evaluate on a real rollout table. The `Task` is the simulation contract
only; what viewers, the offline analyst and teleop need comes from optional modules of the
folder, found by task name. Also: the ROS glue that draws tasks has no per-task branch."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from gymnasium.utils.env_checker import check_env

from refine_core.policy.contract import build_policy
from refine_core.policy.programs import find_starter
from refine_core.tasks import get_task, registry, task_names
from refine_core.tasks.base import Task, _load
from refine_core.tasks.registry import task_part
from refine_core.tasks.scene import Scene, Shape
from refine_core.tasks.view import TaskView

ROOT = Path(__file__).resolve().parents[1]
TASKS = task_names()
FOLDER_FILES = ("__init__.py", "env.py", "expert.py", "task.py", "scene.py")
GYMNASIUM_SECTIONS = ("## Description", "## Action Space", "## Observation Space", "## Rewards",
                      "## Episode End")


def _rollout(task, steps: int = 40, seed: int | None = None):
    """Expert steps in a real env: (env, observations, scenes), the env left open."""
    env = task.make_env()
    obs, _ = env.reset(seed=task.spec.demo_seed if seed is None else seed)
    expert = task.expert(env)
    view = TaskView(task)
    observations, scenes = [obs], [view.scene(env)]
    for _ in range(steps):
        action = expert(obs)
        assert env.action_space.contains(np.asarray(action, dtype=env.action_space.dtype)), action
        obs, _, term, trunc, _ = env.step(action)
        observations.append(obs)
        scenes.append(view.scene(env))
        if term or trunc:
            break
    return env, observations, scenes


def test_three_tasks_each_one_folder_listed_in_one_line():
    assert set(TASKS) == {"car_racing", "door_open", "pendulum"}
    source = (ROOT / "refine_core" / "tasks" / "registry.py").read_text()
    for package in registry.TASK_PACKAGES:
        folder = ROOT / Path(*package.split("."))
        assert all((folder / f).is_file() for f in FOLDER_FILES), folder
        assert sum(package in line for line in source.splitlines()) == 1
        entry = importlib.import_module(package).ENTRY
        assert entry.task.startswith(package + ".") and entry.env_entry_point.startswith(package + ".")
        task = get_task(entry.name)
        assert task.spec.name == entry.name and task.spec.env_id == entry.env_id
        assert entry.env_id in gym.registry
        assert gym.registry[entry.env_id].max_episode_steps == entry.max_episode_steps


@pytest.mark.parametrize("name", TASKS)
def test_env_passes_check_env_and_documents_gymnasium_sections(name):
    entry = registry.entries()[name]
    cls = _load(entry.env_entry_point)
    doc = cls.__doc__ or ""
    missing = [s for s in GYMNASIUM_SECTIONS if s not in doc]
    assert not missing, f"{cls.__name__} docstring lacks {missing}"
    env = cls()
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


@pytest.mark.parametrize("name", TASKS)
def test_expert_acts_in_bounds_and_the_scene_keeps_its_shape(name):
    task = get_task(name)
    env, observations, scenes = _rollout(task)
    try:
        from refine_ros.viewers.scene_topics import scene_topics

        assert len(scenes) > 10
        first = scenes[0]
        assert isinstance(first, Scene) and (first.shapes or first.joints or first.poses)
        for scene in scenes:
            assert scene_topics(scene) == scene_topics(first)
            assert [s.ns for s in scene.shapes] == [s.ns for s in first.shapes]
            assert (scene.joints is None) == (first.joints is None)
            if scene.joints is not None:
                assert scene.joints.names == first.joints.names
                assert np.all(np.isfinite(scene.joints.positions))
            assert (scene.trail is None) == (first.trail is None)
        moving = [s.trail.position for s in scenes if s.trail is not None]
        assert not moving or len(set(moving)) > 1, "the followed point moves with the expert"
        assert all(isinstance(s, Shape) for s in TaskView(task).static_shapes(env))
    finally:
        env.close()


@pytest.mark.parametrize("name", TASKS)
def test_scene_from_a_logged_row_agrees_with_the_live_scene(name):
    task = get_task(name)
    env, observations, scenes = _rollout(task, steps=20)
    env.close()
    for obs, live in zip(observations[-3:], scenes[-3:], strict=True):
        logged = TaskView(task).scene_from_observation(task.observation_row(obs))
        if logged is None:
            continue
        assert logged.poses.keys() <= live.poses.keys()
        for key, pose in logged.poses.items():
            assert pose.position == pytest.approx(live.poses[key].position, abs=1e-5), key
        if logged.joints is not None:
            assert logged.joints.names == live.joints.names
            assert logged.joints.positions == pytest.approx(live.joints.positions, abs=1e-5)
    if name == "car_racing":  # the car's tiles say nothing about where it is in the world
        assert TaskView(task).scene_from_observation(task.observation_row(observations[0])) is None


@pytest.mark.parametrize("name", TASKS)
def test_starter_program_is_found_and_builds_under_the_contract(name):
    task = get_task(name)
    source = find_starter(name)
    assert source, f"{name} has no starter program"
    build_policy(source, task.spec)
    assert source == (ROOT / Path(*registry.task_package(name).split(".")) / "programs" / "starter.py").read_text()


def test_the_task_is_the_simulation_contract_only():
    """What only one user needs is not on the Task: viewers, the offline analyst and teleop
    find it in the task folder's optional modules by task name."""
    members = ({n for n in vars(Task) if not n.startswith("__")} | set(Task.__annotations__)) - {"_abc_impl"}
    # metric_from_observations: whether episode_summary needs the simulator's rewards, which
    # decides whether RL can score an episode on a robot that publishes none
    assert members == {"spec", "description_variants", "make_env", "expert", "split_observation",
                       "observation_row", "episode_summary", "metric_from_observations"}
    for name in TASKS:
        assert task_part(name, "scene") is not None and task_part(name, "teleop") is not None
        assert task_part(name, "no_such_part") is None
    assert task_part("door_open", "offline_catalogue") is not None and task_part("pendulum", "offline_catalogue") is None
    with pytest.raises(registry.UnknownTaskError):
        task_part("moon_landing", "scene")


def test_a_task_with_no_starter_gets_none():
    """An unknown task, or a folder without `programs/starter.py`, has no starter: an analyst
    with a model has to write the first program."""
    assert find_starter("moon_landing") is None
    assert registry.task_file("pendulum", "programs/no_such_program.py") is None
    assert find_starter("pendulum") is not None


@pytest.mark.parametrize("name", TASKS)
def test_diagnostic_features_evaluate_on_a_real_rollout_table(name):
    task = get_task(name)
    env, observations, _ = _rollout(task, steps=30)
    env.close()
    # the battery reads the table under the analyst's column names (the door's published
    # description calls features 4-6 the door's), so the features must be written in them
    from refine_core.loop import analyst_table

    table = analyst_table(task.spec, pd.DataFrame([task.observation_row(o) for o in observations]))
    features = task_part(name, "diagnostics").features(task.spec.for_analyst())
    assert features, f"{name} offers no features for the battery's hot spots"
    for feature, expression in features.items():
        values = eval(expression, {"np": np, "C": lambda column: table[column].to_numpy()})  # noqa: S307
        values = np.broadcast_to(np.asarray(values, dtype=float), (len(table),))
        assert np.all(np.isfinite(values)), feature


def _branch_literals(path: Path, names: set[str]) -> list[str]:
    """Task names used as a comparison operand, an `in` member or a dict key in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        candidates = []
        if isinstance(node, ast.Compare):
            candidates = [node.left, *node.comparators]
        elif isinstance(node, ast.Dict):
            candidates = [k for k in node.keys if k is not None]
        for c in candidates:
            items = c.elts if isinstance(c, (ast.Tuple, ast.List, ast.Set)) else [c]
            found += [f"{path.name}:{i.lineno} {i.value!r}" for i in items
                      if isinstance(i, ast.Constant) and i.value in names]
    return found


def test_the_ros_glue_that_draws_tasks_has_no_per_task_branch(tmp_path):
    files = [ROOT / "refine_ros" / f for f in ("wire/adapters.py", "viewers/markers.py", "viewers/export.py",
                                            "viewers/scene_topics.py")]
    files.append(ROOT / "refine_ros" / "nodes" / "sim_node.py")
    found = [hit for f in files for hit in _branch_literals(f, set(TASKS))]
    assert not found, f"per-task branches: {found}"
    # the check can fail: a branch on a task name is reported
    probe = tmp_path / "probe.py"
    probe.write_text("x = 1\nif spec.name == 'door_open':\n    pass\nkind = {'car_racing': 1}\n")
    assert _branch_literals(probe, set(TASKS)) == ["probe.py:2 'door_open'", "probe.py:4 'car_racing'"]
