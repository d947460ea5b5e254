"""What crosses the graph and how: the step streams' codec (`messages`), a task's observation
and scene as ROS values (`adapters`), the analysis node's actions to the learner (`protocol`)
and the QoS profile of each side of each topic (`qos`)."""
