"""The programs and conditions of the published comparison, as data.

A condition is one program trained one way: IL on the demonstration, then optionally RL at
the low or high reset budget. RL rows follow the published rule (the final weights, exactly
the reset budget); with the best-checkpoint option each RL row gets a twin holding the best
weights on the selection seeds from the same training run, whose extra resets are counted.
Programs come in three roles (MLP, zero-shot structure, refined structure) and from named
sources (a committed LLM run, the offline catalogue), and every row says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PUBLISHED_MODEL = "GPT-5-mini"
"""The model of the published runs. The published figures of each task are in its folder
(`tasks/<task>/published.py`: `RESULTS`, keyed by (role, training) as `Condition.published_key`)."""


@dataclass(frozen=True)
class Program:
    """One program of the comparison and what obtaining it cost."""

    key: str
    """Condition-name prefix: mlp, starter / refined (offline catalogue or a run), llm_zero_shot /
    llm_refined (a committed LLM run)."""
    role: str
    """mlp, zero_shot or refined: which published row it stands for (start: a given start
    program, which stands for none)."""
    label: str
    source: str
    analyst: str = "-"
    """Who wrote it: "-", "offline catalogue (not an LLM)", "LLM <model> (run ...)", "given program"."""
    calls: int = 0
    resets: dict = field(default_factory=dict)
    """Refinement episodes it took: {"diagnostic": n, "selection": m} (published count: diagnostic)."""


@dataclass(frozen=True)
class Condition:
    name: str
    program: str
    """The `Program.key` it trains."""
    rl_resets: int
    """0 = IL only."""
    checkpoint: str = "final"
    """RL weights evaluated: "final" (published) or "best" (on the selection seeds)."""
    label: str = ""
    role: str = ""
    training: str = "il"
    """il, rl_low or rl_high."""

    @property
    def published_key(self) -> tuple[str, str] | None:
        """The published row this condition stands for (only under the published RL rule)."""
        return (self.role, self.training) if self.checkpoint == "final" else None


def conditions(programs: list[Program], low: int, high: int, *, best: bool = False) -> list[Condition]:
    """Every program x (IL, RL low, RL high), plus best-checkpoint twins of the RL rows."""
    out = []
    for p in programs:
        more = "more " if p.role == "refined" else ""
        out.append(Condition(f"{p.key}_il", p.key, 0, label=f"{p.label} + IL", role=p.role))
        for training, budget in (("rl_low", low), ("rl_high", high)):
            base = f"{p.label} + RL, {budget:,} {more}resets"
            out.append(Condition(f"{p.key}_{training}", p.key, budget, label=base, role=p.role, training=training))
            if best:
                out.append(Condition(f"{p.key}_{training}_best", p.key, budget, "best", label=f"{base}, best checkpoint",
                                     role=p.role, training=training))
    return out


def key_comparisons(names: set[str]) -> list[tuple[str, str]]:
    """The comparisons the README quotes, as (a, b): is a different from b? For each pair of
    a refined program and the zero-shot it came from; the last ones ask whether RL does what
    it is for on each program. Only comparisons whose conditions exist."""
    pairs = [("refined", "starter"), ("llm_refined", "llm_zero_shot")]
    out: list[tuple[str, str]] = []
    for refined, zero in pairs:
        out += [(f"{refined}_il", f"{zero}_il"), (f"{refined}_il", "mlp_il"),
                (f"{refined}_rl_low", f"{zero}_rl_high"), (f"{refined}_rl_high", f"{zero}_rl_high"),
                ("mlp_rl_high", f"{refined}_il"), (f"{refined}_rl_low", f"{refined}_il"),
                (f"{refined}_rl_high", f"{refined}_rl_low"), (f"{zero}_rl_high", f"{zero}_il")]
    out.append(("mlp_rl_high", "mlp_il"))
    seen, kept = set(), []
    for a, b in out:
        if a in names and b in names and (a, b) not in seen:
            seen.add((a, b))
            kept.append((a, b))
    return kept
