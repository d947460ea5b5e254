"""What crosses the graph and how: the step streams' codec (`messages`), a task's observation
and scene as ROS values (`adapters`), the analysis node's actions to the learner (`protocol`),
each goal's state read from its action's status topic (`goals`) and the QoS profile of each
side of each topic (`qos`)."""
