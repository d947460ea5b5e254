"""What the offline analyst's diagnostic battery checks on door-opening tables, beyond the
generic checks: the metric (smallest handle-to-target distance, success), the approach to the
handle and the pull (the checks are sandbox code in `diagnostic_checks.py`; here, the calls
that run them), and the state features its expert-disagreement hot spots are binned along.
Both take the spec the analyst reads (`TaskSpec.for_analyst()`: under the published
description features 4-6 are `door_x`...), whose column names the battery's code reads;
`refine_core.analyst.offline.battery` looks this module up by task name.
"""

from __future__ import annotations

from collections.abc import Sequence

from refine_core.tasks.spec import TaskSpec


def check_calls(spec: TaskSpec) -> list[str]:
    """The `_run(...)` lines that run this task's checks, with the column names taken from the spec."""
    cols = spec.input("features").columns
    gripper, handle, target = list(cols[0:3]), list(cols[4:7]), list(cols[36:39])
    args = f"{gripper!r}, {handle!r}"
    return [
        f"_run('metric.door_open', _metric_door, {args}, {target!r})",
        f"_run('door.approach', _approach_check, {args})",
        f"_run('door.pull', _pull_check, {args}, {target!r})",
    ]


def features(spec: TaskSpec) -> dict[str, str]:
    """Named state features for the hot spots: {name: numpy expression over ``C('<column>')``}."""
    cols = spec.input("features").columns
    gripper, handle, target = cols[0:3], cols[4:7], cols[36:39]

    def dist(a: Sequence[str], b: Sequence[str]) -> str:
        terms = " + ".join(f"(C({x!r}) - C({y!r})) ** 2" for x, y in zip(a, b, strict=True))
        return f"np.sqrt({terms})"

    return {
        "handle_gripper_distance": dist(gripper, handle),
        "handle_gripper_xy": dist(gripper[:2], handle[:2]),
        "gripper_above_handle": f"C({gripper[2]!r}) - C({handle[2]!r})",
        "handle_target_distance": dist(handle, target),
    }
