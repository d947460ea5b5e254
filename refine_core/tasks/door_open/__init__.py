"""Door opening: Meta-World door-open-v3 (MuJoCo, Sawyer arm), fully observed and configured
by the seed. `env.py` the env, `expert.py` Meta-World's scripted policy in our action space,
`task.py` the spec and its text, `scene.py` what a viewer draws."""

from refine_core.tasks.base import TaskEntry

# no TimeLimit: the env truncates itself at 500 steps (Meta-World refuses a 501st step)
ENTRY = TaskEntry(
    name="door_open",
    task=f"{__name__}.task:DoorOpenTask",
    env_id="refine/DoorOpen-v0",
    env_entry_point=f"{__name__}.env:DoorOpenEnv",
)
