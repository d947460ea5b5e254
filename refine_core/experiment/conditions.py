"""The conditions of the published Car Racing table, as data."""

from __future__ import annotations

from dataclasses import dataclass

# Published Car Racing returns (METHOD.md), keyed by our condition names.
PUBLISHED_CAR = {
    "mlp_il": "636.6 ± 258.6", "mlp_rl_low": "591.8 ± 330.5", "mlp_rl_high": "850.2 ± 101.4",
    "starter_il": "766.5 ± 100.4", "starter_rl_low": "657.0 ± 37.3", "starter_rl_high": "901.1 ± 14.0",
    "refined_il": "882.0 ± 29.3", "refined_rl_low": "900.5 ± 14.2", "refined_rl_high": "906.5 ± 24.0",
}
PUBLISHED_DOOR = {"starter_il": "0.548", "refined_il": "0.110"}

LABELS = {
    "mlp": "MLP", "starter": "zero-shot structure", "refined": "refined structure",
}


@dataclass(frozen=True)
class Condition:
    name: str
    program: str          # "mlp" | "starter" | "refined"
    rl_resets: int        # 0 = IL only

    @property
    def label(self) -> str:
        base = LABELS[self.program]
        if self.rl_resets == 0:
            return f"{base} + IL"
        more = "more " if self.program == "refined" else ""
        return f"{base} + RL, {self.rl_resets:,} {more}resets"


def conditions(low: int, high: int) -> list[Condition]:
    out = []
    for program in ("mlp", "starter", "refined"):
        out.append(Condition(f"{program}_il", program, 0))
        out.append(Condition(f"{program}_rl_low", program, low))
        out.append(Condition(f"{program}_rl_high", program, high))
    return out


# Comparisons the README quotes, as (a, b): is a different from b? The last four ask whether
# RL does what it is for on each program.
KEY_COMPARISONS = (
    ("refined_il", "starter_il"),
    ("refined_il", "mlp_il"),
    ("refined_rl_low", "starter_rl_high"),
    ("refined_rl_high", "starter_rl_high"),
    ("mlp_rl_high", "refined_il"),
    ("refined_rl_low", "refined_il"),
    ("refined_rl_high", "refined_rl_low"),
    ("starter_rl_high", "starter_il"),
    ("mlp_rl_high", "mlp_il"),
)
