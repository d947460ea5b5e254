"""The arm twin's figure for `refine bench`: what one real-time step costs against its control
period. Nothing here starts ROS. `python -m refine_ros.robots.arm.bench` prints it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

import numpy as np

from refine_ros.robots._twin.costs import cost_figures, tick_costs


def arm_step_cost(seconds: float = 20.0, rate_hz: float = 50.0, progress: bool | None = None) -> dict:
    """What one real-time tick of the arm twin costs (the physics steps due, joint states,
    the TF tree, the marker tracker at 30 Hz) against the control period, with the hand
    circling and the gripper opening and closing."""
    from refine_ros.robots.arm.twin import (
        OPEN_GAP_M,
        ArmTwin,
        ArmTwinConfig,
        GripperGoal,
        TwistCommand,
    )

    twin = ArmTwin(ArmTwinConfig(rate_hz=rate_hz))

    def command(t: float) -> None:
        w = 2.0 * np.pi * 0.25
        twin.twist(TwistCommand((0.05 * np.cos(w * t), 0.05 * np.sin(w * t), 0.0)), t)
        twin.grip(GripperGoal(OPEN_GAP_M if int(t) % 4 < 2 else 0.0), t)

    period = 1.0 / rate_hz
    out = cost_figures(tick_costs(command, twin.tick, int(seconds * rate_hz), period, progress, "arm twin"), period)
    out["status"] = {k: v for k, v in twin.status().items() if k != "dropped"}
    twin.close()
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="simulated seconds")
    parser.add_argument("--rate", type=float, default=50.0, help="control rate (Hz)")
    args = parser.parse_args(argv)
    print(json.dumps(arm_step_cost(args.seconds, args.rate), indent=2))


if __name__ == "__main__":
    main()
