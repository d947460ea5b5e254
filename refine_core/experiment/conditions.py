"""The programs and conditions of the published comparison, as data.

A condition is one program trained one way: IL on the demonstration, then optionally RL at
the low or high reset budget under a named RL preset (`learn.rl.PRESETS`): "ours", the
product's RL (trust region, checkpoints accepted in the deployed mode by a margin), and
"published", METHOD.md's settings and rule (the final weights, exactly the reset budget),
which alone stand beside the published figures. With the best-checkpoint option each
published-preset RL row gets a twin holding the best weights on the selection seeds from the
same training run, whose extra resets are counted.
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
    preset: str = ""
    """The RL preset of an RL row ("ours" or "published"); "" for IL rows."""

    @property
    def published_key(self) -> tuple[str, str] | None:
        """The published row this condition stands for: IL rows, and RL rows under the
        published settings and rule."""
        if self.training == "il":
            return (self.role, self.training)
        return (self.role, self.training) if self.checkpoint == "final" and self.preset == "published" else None

    @property
    def il_condition(self) -> str:
        """The IL row of the same program (what RL started from)."""
        return f"{self.program}_il"


PRESET_LABELS = {"ours": "ours", "published": "published settings"}
"""How a row's label names its RL preset."""
PRESET_SUFFIX = {"ours": "", "published": "_published"}
"""Condition-name suffix of each preset's RL rows (ours, the product default, has none)."""


def conditions(programs: list[Program], low: int, high: int, *, best: bool = False,
               presets: tuple[str, ...] = ("ours", "published")) -> list[Condition]:
    """Every program x (IL, then RL low and RL high under each preset), plus best-checkpoint
    twins of the published-preset RL rows."""
    out = []
    for p in programs:
        more = "more " if p.role == "refined" else ""
        out.append(Condition(f"{p.key}_il", p.key, 0, label=f"{p.label} + IL", role=p.role))
        for preset in presets:
            for training, budget in (("rl_low", low), ("rl_high", high)):
                base = f"{p.label} + RL, {budget:,} {more}resets [RL: {PRESET_LABELS[preset]}]"
                name = f"{p.key}_{training}{PRESET_SUFFIX[preset]}"
                out.append(Condition(name, p.key, budget, label=base, role=p.role, training=training, preset=preset,
                                     checkpoint="accepted" if preset == "ours" else "final"))
                if best and preset == "published":
                    out.append(Condition(f"{name}_best", p.key, budget, "best", label=f"{base}, best checkpoint",
                                         role=p.role, training=training, preset=preset))
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
    out += [(rl_name(a, suffix), rl_name(b, suffix)) for a, b in list(out) for suffix in PRESET_SUFFIX.values()
            if suffix]
    seen, kept = set(), []
    for a, b in out:
        if a in names and b in names and (a, b) not in seen:
            seen.add((a, b))
            kept.append((a, b))
    return kept


def rl_name(name: str, suffix: str) -> str:
    """A condition name with an RL preset's suffix (IL rows have none)."""
    return name if name.endswith("_il") else name + suffix
