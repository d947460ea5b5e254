"""Car racing: Gymnasium's CarRacing physics (Box2D) with the semantic tile/indicator
observation of METHOD.md. `env.py` the env, `expert.py` the scripted driver, `task.py` the
spec and its text, `scene.py` what a viewer draws."""

from refine_core.tasks.base import TaskEntry

ENTRY = TaskEntry(
    name="car_racing",
    task=f"{__name__}.task:CarRacingTask",
    env_id="refine/CarRacingSemantic-v0",
    env_entry_point=f"{__name__}.env:CarRacingSemantic",
    max_episode_steps=1000,
)
