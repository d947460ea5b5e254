"""A new task is one folder plus one line in the registry: nothing else in the code names it,
and the experiment, teleoperation, the viewers and the offline analyst take it as it is.

Two proofs. The pendulum (a bundled task) is named by no code outside its folder but the
registry's line, and runs through `refine experiment` (and, in test_third_task.py, through
`refine run` and `refine up`). A throwaway task written into a temporary folder here and
registered with that one line is found by every user of a task's optional parts.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from refine_core.cli import main
from refine_core.tasks import registry

ROOT = Path(__file__).resolve().parents[1]


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module except docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_code_outside_the_pendulum_folder_names_it_but_the_registry_line():
    folder = ROOT / "refine_core" / "tasks" / "pendulum"
    found = []
    for package in ("refine_core", "refine_ros"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if folder in path.parents:
                continue
            found += [f"{path.relative_to(ROOT)}:{line} {text!r}" for line, text in _string_constants(path)
                      if "pendulum" in text.lower()]
    assert found == [f"refine_core/tasks/registry.py:{_registry_line('refine_core.tasks.pendulum')} "
                     "'refine_core.tasks.pendulum'"]


def _registry_line(package: str) -> int:
    lines = (ROOT / "refine_core" / "tasks" / "registry.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if f'"{package}"' in line)


@pytest.mark.timeout(900)
def test_refine_experiment_runs_the_pendulum(tmp_path):
    out = tmp_path / "results"
    assert main(["experiment", "--task", "pendulum", "--smoke", "--out", str(out), "--date", "t",
                 "--workers", "1"]) == 0
    folder = out / "pendulum" / "t"
    table = (folder / "table.md").read_text()
    assert "# pendulum: return over 2 unseen seeds" in table
    assert "the published comparison has no pendulum task" in table
    episodes = pd.read_csv(folder / "episodes.csv")
    assert {"mlp_il", "starter_il", "refined_il", "refined_rl_high"} <= set(episodes["condition"])
    assert episodes["metric"].notna().all()


def test_refine_experiment_refuses_an_unknown_task_in_one_line(capsys):
    assert main(["experiment", "--task", "moon_landing", "--smoke"]) == 2
    assert "unknown task 'moon_landing'" in capsys.readouterr().err


# ---- a throwaway task, registered with one line ---------------------------------------------------
FOLDER = {
    "__init__.py": '''
        from refine_core.tasks.base import TaskEntry

        ENTRY = TaskEntry(name="slider", task=f"{__name__}.task:SliderTask", env_id="test/Slider-v0",
                          env_entry_point=f"{__name__}.env:SliderEnv", max_episode_steps=30)
    ''',
    "env.py": '''
        import gymnasium as gym
        import numpy as np


        class SliderEnv(gym.Env):
            """A point on a line pushed towards zero."""

            observation_space = gym.spaces.Box(-10.0, 10.0, (1,), np.float32)
            action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

            def reset(self, *, seed=None, options=None):
                super().reset(seed=seed)
                self.x = float(self.np_random.uniform(-1.0, 1.0))
                return np.array([self.x], np.float32), {}

            def step(self, action):
                self.x = float(np.clip(self.x + 0.1 * float(action[0]), -10.0, 10.0))
                return np.array([self.x], np.float32), -abs(self.x), False, False, {}
    ''',
    "task.py": '''
        import gymnasium as gym
        import numpy as np

        from refine_core.tasks.base import Task
        from refine_core.tasks.spec import ActionSpec, InputSpec, MetricSpec, TaskSpec


        class SliderTask(Task):
            def __init__(self):
                self.spec = TaskSpec(name="slider", env_id="test/Slider-v0", description="Push the point to zero.",
                                     policy_class="SliderPolicy",
                                     inputs=(InputSpec("state", (1,), ("x",), "position"),),
                                     actions=(ActionSpec("push", -1.0, 1.0, "push"),),
                                     metric=MetricSpec("return", True, "the return"), episode_steps=30)

            def make_env(self, render_mode=None):
                return gym.make("test/Slider-v0")

            def expert(self, env):
                return lambda obs: np.array([-np.sign(obs[0])], np.float32)

            def split_observation(self, obs):
                return {"state": np.asarray(obs, np.float32)}

            def episode_summary(self, observations, rewards, infos):
                ret = float(np.sum(rewards))
                return {"return": ret, "metric": ret, "success": float(abs(observations[-1][0]) < 0.1)}
    ''',
    "scene.py": '''
        from refine_core.tasks.scene import Pose, Scene, Shape


        def scene(env):
            x = env.unwrapped.x
            return Scene(shapes=(Shape("point", "sphere", Pose((x, 0.0, 0.0)), (0.1, 0.1, 0.1), (1.0, 0.0, 0.0, 1.0)),))
    ''',
    "teleop.py": '''
        GAMEPAD = {"push": ("left_x", -1.0, 0.0)}
        KEYS = {"a": ("push", -1.0), "d": ("push", 1.0)}
        KEYS_HELP = "a/d: push left/right"
    ''',
    "programs/starter.py": '''
        import torch
        from torch import nn


        class SliderPolicy(nn.Module):
            def __init__(self):
                super().__init__()
                self.gain = nn.Parameter(torch.tensor(-1.0))
                self.log_std = nn.Parameter(torch.tensor([-1.0]))

            def forward(self, state):
                mean = self.gain * state
                tril = torch.diag_embed(torch.exp(self.log_std).expand_as(mean))
                return mean, tril, {"weight_gain": self.gain.reshape(1)}
    ''',
}


@pytest.fixture()
def slider(tmp_path, monkeypatch):
    """The folder written under a fresh package name, and its one registry line."""
    package = tmp_path / "slider_task"
    for name, text in FOLDER.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(textwrap.dedent(text).lstrip())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "TASK_PACKAGES", (*registry.TASK_PACKAGES, "slider_task"))
    registry._packages.cache_clear()
    registry.register_envs()
    yield registry.get_task("slider")
    registry._packages.cache_clear()
    for module in [m for m in sys.modules if m.split(".")[0] == "slider_task"]:
        del sys.modules[module]


def test_a_throwaway_task_folder_with_one_registry_line_is_found_by_every_user(slider, capsys):
    from refine_core.analyst.offline import OfflineAnalyst
    from refine_core.analyst.offline.battery import diagnostic_battery
    from refine_core.experiment import outputs
    from refine_core.policy.contract import build_policy
    from refine_core.policy.programs import starter_program
    from refine_core.rollout.schema import RolloutSchema
    from refine_core.tasks.view import TaskView
    from refine_ros.teleop.maps import KeyboardState, joy_map_for, keymap_for
    from refine_ros.viewers.scene_topics import scene_topics

    spec = slider.spec
    assert main(["tasks"]) == 0 and "slider" in capsys.readouterr().out
    # teleoperation: the folder's maps
    assert joy_map_for(spec).command(spec, [0.5, 0, 0, 0, 0, 0]).tolist() == [-0.5]
    keys = KeyboardState(spec, keymap_for(spec))
    keys.press("d", 0.0)
    assert keys.command(0.1).tolist() == [1.0]
    # viewers: the folder's scene, with defaults for what it leaves out
    view = TaskView(slider)
    env = slider.make_env()
    env.reset(seed=0)
    assert scene_topics(view.scene(env)) == scene_topics(view.scene(env)) and view.scene(env).shapes[0].ns == "point"
    assert view.static_shapes(env) == () and view.scene_from_observation({"x": 0.0}) is None
    assert view.camera_frame is None
    env.close()
    # the offline analyst: the folder's starter, the generic battery, no catalogue
    analyst = OfflineAnalyst()
    first = analyst.generate(spec)
    assert first.program == starter_program("slider")
    schema = RolloutSchema.for_task(spec, ("weight_gain",)).columns
    battery = diagnostic_battery(spec, first.program, schema)
    assert "_run('metric.generic', _metric_generic)" in battery and "sign.weight_gain" in battery
    build_policy(first.program, spec)
    # the experiment's notes: no published figures for it
    notes = outputs.protocol_departures(pd.DataFrame({"rl_departures": []}), spec,
                                        type("Opts", (), {"scale": 1.0, "il": {}, "seeds": 2})(), [])
    assert notes == ["the published comparison has no slider task: there are no published figures for it"]
    assert np.isfinite(slider.episode_summary([np.zeros(1)], [0.0], [{}])["return"])
