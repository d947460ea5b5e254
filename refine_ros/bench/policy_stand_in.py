"""The learner's control path, standing alone for the fault matrix's process-death cells: a
process that publishes one task action on `refine/action` at the control rate, as the
learner's policy does during an episode (counted vectors: episode, step; label `policy`), so
the matrix can SIGKILL or SIGSTOP "the learner" without fitting a program first. What the
safety node sees when it dies is what it sees when the learner dies mid-episode: the policy's
commands stop.

`python -m refine_ros.bench.policy_stand_in --ros-args -p action:="[0.3, 0.0, 0.0, 1.0]"`
"""

from __future__ import annotations

from typing import Any

from rclpy.node import Node
from std_msgs.msg import Float64MultiArray

from refine_ros.nodes._main import run_node
from refine_ros.params import Param, declare_parameters, values
from refine_ros.wire import qos
from refine_ros.wire.messages import pack_vector

PARAMETERS: dict[str, Param] = {
    "action": Param([0.0], "the task action published at every step"),
    "episode": Param(1, "the episode counter the actions carry", (0, 2**31 - 1)),
    "rate": Param(50.0, "Hz of refine/action (the control rate)", (1.0, 1000.0)),
}


class PolicyStandIn(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("learner_node", **kwargs)
        declare_parameters(self, PARAMETERS)
        p = values(self, PARAMETERS)
        self.action = tuple(float(v) for v in p["action"])
        self.episode, self.step = int(p["episode"]), 0
        self.pub = self.create_publisher(Float64MultiArray, "refine/action", qos.CONTROL)
        self.create_timer(1.0 / float(p["rate"]), self._tick)

    def _tick(self) -> None:
        self.pub.publish(pack_vector(self.episode, self.step, self.action, label="policy"))
        self.step += 1


def main(args: list[str] | None = None) -> None:
    run_node(PolicyStandIn, args)


if __name__ == "__main__":
    main()
