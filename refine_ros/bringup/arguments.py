"""Launch arguments: the knobs a user turns on one launch (`ros2 launch ... max_rounds:=5`,
`refine up PROFILE --set ...`), their types, and the options every launch has.

A profile declares its own arguments (`arguments:` in its YAML, read by `profiles`); the
options here configure the launch itself (RViz, robot_state_publisher, keep_alive) and are
the same for every profile of a kind. Launch arguments arrive as strings, so each argument
knows the type its value is read as.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ARGUMENT_TYPES: dict[str, Any] = {"bool": False, "int": 0, "float": 0.0, "str": ""}
"""An argument with no default in its profile names its type instead (`type: int`)."""

class ProfileError(ValueError):
    """A profile that cannot be resolved: unknown name, bad override, malformed YAML or a node
    whose module is missing. The message says what to change."""


@dataclass(frozen=True)
class LaunchArgument:
    """One user-facing knob (`ros2 launch ... max_rounds:=5`, `refine up PROFILE --max-rounds 5`).

    `default` None means unset: the node parameters the argument feeds keep the nodes' own
    defaults (declared once, in the node's PARAMETERS table), so a profile never repeats them.
    """

    name: str
    default: Any
    description: str = ""
    kind: str = "str"
    """bool | int | float | str: the type a value given on the command line is read as."""

    @property
    def default_text(self) -> str:
        """The default as ros2 launch spells it (launch arguments are strings; '' = unset)."""
        if self.default is None:
            return ""
        return str(self.default).lower() if isinstance(self.default, bool) else str(self.default)

    def read(self, value: Any) -> Any:
        """A command-line value in this argument's type; '' (or None) means unset."""
        if value is None or (isinstance(value, str) and value.strip() == ""):
            return None
        return coerce(value, ARGUMENT_TYPES[self.kind], self.name)


LAUNCH_OPTIONS: tuple[LaunchArgument, ...] = (
    LaunchArgument("rviz", True, "start rviz2 with config/refine.rviz; when rviz2 is not installed the "
                   "launch goes on without it and says so", "bool"),
    LaunchArgument("robot_state_publisher", True, "start robot_state_publisher with the profile's URDF (the "
                   "TF tree RViz draws the robot model from); when it is not installed the launch goes on "
                   "without it and says so", "bool"),
    LaunchArgument("keep_alive", False, "false: the launch ends when the analysis node finishes the run; "
                   "true: every other node keeps running (e.g. to look at the last episode in RViz) until "
                   "Ctrl-C", "bool"),
)
"""Arguments of every launch file that configure the launch itself, not a node parameter;
`refine up` ignores them (it starts neither RViz nor robot_state_publisher and always ends
with the run)."""
REAL_ROBOT_STATE_PUBLISHER = LaunchArgument(
    "robot_state_publisher", False, "false: the robot's own robot_state_publisher publishes its TF tree "
    "(REP-105: map -> odom -> base_link), and nothing of ours joins it; true: also start one with the "
    "profile's URDF (a model whose root is `world`: only where no other publisher runs)", "bool")
"""A real robot already runs robot_state_publisher and owns its TF tree: ours would be a second
publisher of it, so a real profile starts ours only when asked."""


def launch_options(kind: str) -> tuple[LaunchArgument, ...]:
    """The launch options of a profile of this kind (real: no robot_state_publisher of ours by
    default)."""
    if kind != "real":
        return LAUNCH_OPTIONS
    return tuple(REAL_ROBOT_STATE_PUBLISHER if o.name == "robot_state_publisher" else o for o in LAUNCH_OPTIONS)


RENAMED: dict[str, str] = {"rounds": "max_rounds", "episodes": "diagnostic_episodes"}
"""Old argument name -> its name now (the RefineConfig field, as `refine run`'s flag and the
analysis node's parameter): still accepted, with a warning."""


def renamed(given: Mapping[str, Any], declared: Iterable[str]) -> dict[str, Any]:
    """`given` with the old names of `declared` arguments changed to their names now (a
    FutureWarning says so). The old name's value wins: a launch file declares the new name with
    its default, so under `ros2 launch` the new name always has a value."""
    names = set(declared)
    out = dict(given)
    for old, new in RENAMED.items():
        if old in out and old not in names and new in names:
            warnings.warn(f"launch argument {old!r} is deprecated: use {new!r}", FutureWarning, stacklevel=3)
            out[new] = out.pop(old)
    return out


def coerce(value: Any, default: Any, name: str) -> Any:
    """Launch arguments arrive as strings ('3', 'true'); give them the type of the default so
    node parameters get the types they declare."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise ProfileError(f"argument {name!r} must be true or false, got {value!r}")
    if isinstance(default, int):
        try:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(str(value).strip()) if not isinstance(value, (int, float)) else int(value)
        except ValueError:
            raise ProfileError(f"argument {name!r} must be an integer, got {value!r}") from None
    if isinstance(default, float):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ProfileError(f"argument {name!r} must be a number, got {value!r}") from None
    return str(value)
