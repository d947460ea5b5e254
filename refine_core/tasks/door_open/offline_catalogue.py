"""The offline analyst's pre-written edits of the door's starter (`programs/offline_template.py`
holds the starter with every edit's regions), each tied to the diagnostic results that call
for it; plain data that `refine_core.analyst.offline.catalogue` reads (its `edit_from_data`
says the format). Not an LLM: written here in advance, so never evidence for the method."""

EDITS: tuple[dict, ...] = (
    {
        "id": "door_hover_release",
        "description": (
            "Make the hover above the handle fade with the square of the horizontal "
            "misalignment. The gripper waits above the handle, already aligned, for many more "
            "steps than the demonstration did: the exponential fade still holds it a few "
            "centimetres up when aligned, so it reaches the handle late."
        ),
        # 5 steps: against the demonstration on seed 500 (5 steps of waiting) the starter waits
        # 11-17 (excess 6-12 over one or two diagnostic episodes, mean or sampled actions);
        # against the earlier one on seed 0 (3 steps) it waited 20.5, and the rule said 10
        "any_of": (
            ("door.approach", "wait_excess", ">", 5.0),
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
