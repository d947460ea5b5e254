"""The published comparison's figures for the door and how our protocol departs from it (plain
data that `refine experiment` reads by task name; METHOD.md gives the sources)."""

RESULTS = {("zero_shot", "il"): "0.548", ("refined", "il"): "0.110"}
"""Published smallest handle-target distances over the episode, keyed by (program role, training)."""
VERIFIED_EVALUATION = {"mode": "sample", "seeds": tuple(range(10))}
"""How the authors' own verification evaluated the published door figures: sampled actions,
environment and sampling seeds 0-9 (the action mean gives 0.196 for the published refined
policy, not 0.110). The task spec's `eval_mode` and `eval_seeds` follow it."""
DEMONSTRATION = "one episode of our scripted expert (the simulator's own scripted door policy), not the published one"
"""How our demonstration differs from the published one (the seed is the task spec's)."""
DESCRIPTION = "the published information in our own words, naming no simulator, robot model or library"
"""What our published description is (the published prompt, reworded; nothing added)."""
RL = "window 150 steps: the published value is the car's; the door's is not published"
"""How our RL setting departs from the published one for this task."""
