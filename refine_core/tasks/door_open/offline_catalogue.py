"""The offline analyst's catalogue for this task: pre-written structural edits of the bundled
starter (`programs/offline_template.py` holds the starter with every edit's regions), each
tied to the diagnostic results that call for it. Not an LLM: these edits are written here in
advance, which is why the offline analyst's results are never evidence for the method.

Plain data, which `refine_core.analyst.offline.catalogue` reads by task name: per edit its
`id`, `description` and trigger, `all_of` (every condition holds: what the problem is) and
`any_of` (at least one holds: its symptoms), each condition `(check, key, op, threshold)` on
the battery's `CHECK` lines; optionally `requires` (edits it builds on)."""

EDITS: tuple[dict, ...] = (
    {
        "id": "door_hover_release",
        "description": (
            "Make the hover above the handle fade with the square of the horizontal "
            "misalignment. The gripper waits above the handle, already aligned, for many more "
            "steps than the demonstration did: the exponential fade still holds it a few "
            "centimetres up when aligned, so it reaches the handle late."
        ),
        "any_of": (
            ("door.approach", "wait_excess", ">", 10.0),
            ("door.approach", "contact_ratio", ">", 1.5),
        ),
    },
    {
        "id": "door_pull_follow",
        "description": (
            "While grasping, add the handle's own last step to the motion command "
            "(feed-forward), so the gripper moves with the swinging handle instead of trailing "
            "it. After first contact the gripper loses the handle, or the door stops short of "
            "the distance the demonstration reached."
        ),
        "any_of": (
            ("door.pull", "lost_frac", ">", 0.2),
            ("metric.door_open", "gap", ">", 0.05),
        ),
    },
)
