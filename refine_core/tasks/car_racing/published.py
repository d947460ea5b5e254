"""The published comparison's figures for the car and how our protocol departs from it (plain
data that `refine experiment` reads by task name; METHOD.md gives the sources)."""

RESULTS = {
    ("mlp", "il"): "636.6 ± 258.6", ("mlp", "rl_low"): "591.8 ± 330.5", ("mlp", "rl_high"): "850.2 ± 101.4",
    ("zero_shot", "il"): "766.5 ± 100.4", ("zero_shot", "rl_low"): "657.0 ± 37.3",
    ("zero_shot", "rl_high"): "901.1 ± 14.0",
    ("refined", "il"): "882.0 ± 29.3", ("refined", "rl_low"): "900.5 ± 14.2", ("refined", "rl_high"): "906.5 ± 24.0",
}
"""Published returns, mean ± std, keyed by (program role, training)."""
DEMONSTRATION = "one episode of our scripted expert (seed 0), not a human's"
"""How our demonstration differs from the published one."""
DESCRIPTION = "the published information in our own words, with one fact corrected (the car is about 1.4 tiles long here, not 3)"
"""How our published description differs from the published prompt."""
