"""Pendulum swing-up: Gymnasium's Pendulum-v1 physics with a semantic observation (angle from
upright, angular velocity). `env.py` the env, `expert.py` an energy-pumping swing-up with a PD
balance, `task.py` the spec and its text, `scene.py` what a viewer draws,
`programs/starter.py` the zero-shot program."""

from refine_core.tasks.base import TaskEntry

ENTRY = TaskEntry(
    name="pendulum",
    task=f"{__name__}.task:PendulumTask",
    env_id="refine/Pendulum-v0",
    env_entry_point=f"{__name__}.env:PendulumSemantic",
    max_episode_steps=200,
)
