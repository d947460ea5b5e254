"""The offline analyst's catalogue for this task: pre-written structural edits of the bundled
starter (`programs/offline_template.py` holds the starter with every edit's regions), each
tied to the diagnostic results that call for it. Not an LLM: these edits are written here in
advance, which is why the offline analyst's results are never evidence for the method."""

from __future__ import annotations

from refine_core.analyst.offline.catalogue import Edit, Trigger
from refine_core.analyst.offline.catalogue import when as _c

EDITS: tuple[Edit, ...] = (
    Edit(
        id="door_hover_release",
        task="door_open",
        description=(
            "Make the hover above the handle fade with the square of the horizontal "
            "misalignment. The gripper waits above the handle, already aligned, for many more "
            "steps than the demonstration did: the exponential fade still holds it a few "
            "centimetres up when aligned, so it reaches the handle late."
        ),
        trigger=Trigger(
            any_of=(
                _c("door.approach", "wait_excess", ">", 10.0),
                _c("door.approach", "contact_ratio", ">", 1.5),
            )
        ),
    ),
    Edit(
        id="door_pull_follow",
        task="door_open",
        description=(
            "While grasping, add the handle's own last step to the motion command "
            "(feed-forward), so the gripper moves with the swinging handle instead of trailing "
            "it. After first contact the gripper loses the handle, or the door stops short of "
            "the distance the demonstration reached."
        ),
        trigger=Trigger(
            any_of=(
                _c("door.pull", "lost_frac", ">", 0.2),
                _c("metric.door_open", "gap", ">", 0.05),
            )
        ),
    ),
)
