"""What a viewer draws for a task, found by task name: the task folder's optional `scene.py`.

The sim node (live topics, RViz) and the MCAP export draw any task through `TaskView` and
never ask which task they hold. A task's `scene.py` may define, each optional:

    scene(env) -> Scene                   the current state, once per step (cheap: far less
                                          than a step; the same fields filled at every step)
    static_shapes(env) -> tuple[Shape]    what is fixed for the episode (a race track), read
                                          once after each reset; viewers re-send it now and then
    scene_from_observation(row) -> Scene | None
                                          what a logged observation row ({column: value}) alone
                                          shows, for a database replayed without a simulator
    camera_env(width, height) -> gym.Env  an env whose render() draws at that size (MuJoCo);
                                          otherwise the task's env renders at its own size
    CAMERA_FRAME                          the camera image's frame id; otherwise the node's

A task without a `scene.py` draws an empty scene: nothing but its camera image.
"""

from __future__ import annotations

from collections.abc import Mapping

import gymnasium as gym

from refine_core.tasks.base import Task
from refine_core.tasks.registry import task_part
from refine_core.tasks.scene import Scene, Shape

PART = "scene"
"""The task folder's module that holds the drawing hooks."""


class TaskView:
    """`task` as viewers see it: the folder's drawing hooks, with a default for each one the
    folder leaves out."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self._hooks = task_part(task.spec.name, PART)
        self.camera_frame: str | None = getattr(self._hooks, "CAMERA_FRAME", None)

    def _hook(self, name: str):
        return getattr(self._hooks, name, None)

    def scene(self, env: gym.Env) -> Scene:
        hook = self._hook("scene")
        return hook(env) if hook is not None else Scene()

    def static_shapes(self, env: gym.Env) -> tuple[Shape, ...]:
        hook = self._hook("static_shapes")
        return tuple(hook(env)) if hook is not None else ()

    def scene_from_observation(self, row: Mapping[str, float]) -> Scene | None:
        hook = self._hook("scene_from_observation")
        return hook(row) if hook is not None else None

    def make_camera_env(self, width: int, height: int) -> gym.Env:
        """An env whose `render()` returns RGB frames for a camera topic; without the task's
        own `camera_env` it renders at the env's own size and leaves resizing to the caller."""
        hook = self._hook("camera_env")
        return hook(width, height) if hook is not None else self.task.make_env(render_mode="rgb_array")
