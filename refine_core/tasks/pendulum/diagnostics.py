"""The state features along which the offline analyst's diagnostic battery looks for
expert-disagreement hot spots on pendulum tables (the pendulum has no checks of its own: the
battery runs its generic ones); `refine_core.analyst.offline.battery` looks this module up by
task name."""

from __future__ import annotations

from refine_core.tasks.spec import TaskSpec


def features(spec: TaskSpec) -> dict[str, str]:
    """{name: numpy expression over ``C('<column>')``}, in the column names of `spec`."""
    angle, velocity = (repr(c) for c in spec.input("state").columns)
    return {
        "abs_angle": f"np.abs(C({angle}))",
        "speed": f"np.abs(C({velocity}))",
        "missing_energy": f"-(0.5 * C({velocity}) ** 2 + 15.0 * (np.cos(C({angle})) - 1.0))",
    }
