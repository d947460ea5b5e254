"""The published comparison's figures for the door and how our protocol departs from it (plain
data that `refine experiment` reads by task name; METHOD.md gives the sources)."""

RESULTS = {("zero_shot", "il"): "0.548", ("refined", "il"): "0.110"}
"""Published smallest handle-target distances, keyed by (program role, training)."""
RL = "window 150 steps: the published value is the car's; the door's is not published"
"""How our RL setting departs from the published one for this task."""
