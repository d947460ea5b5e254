"""Summarise `refine rl --out` JSON files of the door sweep into a markdown table."""
import json, sys
from pathlib import Path
import numpy as np
from scipy.stats import ttest_rel

rows = []
for path in sorted(Path(sys.argv[1]).glob("*.json")):
    d = json.loads(path.read_text())
    argv = " ".join(d["argv"])
    il = d["eval_il"]
    upd = d["rl"].get("accepted_update")
    acc = d.get("eval_accepted") or (il if not upd else d["eval_final"])
    a, b = np.array(il["mean"]["per_seed"]), np.array(acc["mean"]["per_seed"])
    if np.allclose(a, b):
        verdict = "same weights as IL"
    else:
        better = ttest_rel(b, a, alternative="less").pvalue  # lower distance is better
        worse = ttest_rel(b, a, alternative="greater").pvalue
        verdict = f"p better {better:.2g}, p worse {worse:.2g}"
    opened = lambda xs: sum(x < 0.05 for x in xs)
    rows.append((path.stem, argv, f'{il["mean"]["mean"]:.4f} ({opened(a)}/10)',
                 f'{acc["mean"]["mean"]:.4f} ({opened(b)}/10)', f'{acc["sample"]["mean"]:.4f}',
                 f'{d["eval_final"]["mean"]["mean"]:.4f}', f'{upd} of {d["rl"]["updates"]}', verdict, f'{d.get("rl_seconds", 0):.0f}'))
print("| run | command (`refine rl ...`) | IL, mean action (seeds under 0.05 m) | accepted, mean action (seeds under 0.05 m) | accepted, sampled | final weights, mean action | accepted update | accepted vs IL (paired, mean action) | RL seconds |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
