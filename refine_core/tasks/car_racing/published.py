"""The published comparison's figures for the car and how our protocol departs from it (plain
data that `refine experiment` reads by task name; METHOD.md gives the sources)."""

RESULTS = {
    ("mlp", "il"): "636.6 ± 258.6", ("mlp", "rl_low"): "591.8 ± 330.5", ("mlp", "rl_high"): "850.2 ± 101.4",
    ("zero_shot", "il"): "766.5 ± 100.4", ("zero_shot", "rl_low"): "657.0 ± 37.3",
    ("zero_shot", "rl_high"): "901.1 ± 14.0",
    ("refined", "il"): "882.0 ± 29.3", ("refined", "rl_low"): "900.5 ± 14.2", ("refined", "rl_high"): "906.5 ± 24.0",
}
"""Published returns, mean ± std, keyed by (program role, training)."""
VERIFIED_EVALUATION = {"mode": "mean", "seeds": tuple(range(1000, 1010))}
"""How the authors' own verification evaluated the published car figures: the action mean on
tracks 1000-1009 (the task spec's `eval_mode` and `eval_seeds` follow it)."""
DEMONSTRATION = "one episode of our scripted expert, not the published demonstration (one person's episode)"
"""How our demonstration differs from the published one (the seed is the task spec's)."""
DESCRIPTION = ("the published information in our own words, naming no simulator or library, with one fact "
               "corrected (the car is about 1.4 tiles long here, not 3)")
"""How our published description differs from the published prompt."""
