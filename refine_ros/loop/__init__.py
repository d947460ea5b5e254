"""`refine_core.loop.refine()` spread over the graph: the analysis node's two seams over DDS
(`graph`: fitting and rollouts sent to the learner, steps logged by the rollout logger), and
the learner's side of them, apart from its node: the round driver that runs a request's
episodes (`round_driver`) and the control path that answers each observation (`control_path`)."""
