"""What the offline analyst's diagnostic battery checks on car-racing tables, beyond the
generic checks: the metric (return, laps, off-track time), time on the grass, speed into bends
and rear-wheel spin (the checks are sandbox code in `diagnostic_checks.py`; here, the calls
that run them), and the state features its expert-disagreement hot spots are binned along.
Both take the spec the analyst reads (`TaskSpec.for_analyst()`), whose column names the
battery's code reads; `refine_core.analyst.offline.battery` looks this module up by task name.
"""

from __future__ import annotations

from refine_core.rollout.schema import action_column
from refine_core.tasks.spec import TaskSpec


def check_calls(spec: TaskSpec) -> list[str]:
    """The `_run(...)` lines that run this task's checks, with the column names taken from the spec."""
    tiles, ind = spec.input("tiles").columns, spec.input("indicators").columns
    bend = "np.max(np.abs(np.column_stack([" + ", ".join(f"C({tiles[k * 4 + 2]!r})" for k in range(4, 12)) + "])), axis=1)"
    steer, gas = (action_column("act", a.name) for a in spec.actions[:2])
    return [
        f"_run('metric.car_racing', _metric_car, {tiles[0]!r}, {ind[0]!r})",
        f"_run('offtrack', _offtrack_check, {tiles[0]!r})",
        f"_run('bend.speed', _bend_speed_check, {tiles[0]!r}, {ind[0]!r}, lambda: {bend})",
        f"_run('traction', _traction_check, {ind[0]!r}, ({ind[5]!r}, {ind[6]!r}), {steer!r}, {gas!r})",
    ]


def features(spec: TaskSpec) -> dict[str, str]:
    """Named state features for the hot spots: {name: numpy expression over ``C('<column>')``}."""
    tiles = spec.input("tiles").columns
    indicators = spec.input("indicators").columns

    def tile(k: int, j: int) -> str:
        return f"C({tiles[k * 4 + j]!r})"

    ahead = " + ".join(tile(k, 2) for k in range(1, 12))
    bend = " + ".join(f"np.abs({tile(k, 2)})" for k in range(5, 12))
    return {
        "abs_offset": f"np.abs({tile(0, 0)})",
        "heading_ahead": f"({ahead}) / 11",
        "bend": f"({bend}) / 7",
        "speed": f"C({indicators[0]!r})",
        "yaw_rate": f"C({indicators[2]!r})",
    }
