"""Which episodes a round runs, on which seeds: the one seed plan every front end uses.

Why a plan: the local loop and the ROS learner must run the same episodes for a round to mean
the same thing, and the seed groups must never overlap (a round chosen on the evaluation
seeds would be tuned to them). The task spec holds the seed groups; this module only decides
how many of each a round takes and in which order.
"""

from __future__ import annotations

from dataclasses import dataclass

from refine_core.rollout.schema import EPISODE_KINDS
from refine_core.tasks.spec import TaskSpec


@dataclass(frozen=True)
class PlannedEpisode:
    kind: str
    """diagnostic (the table the analyst reads), selection (picks the best round) or eval."""
    index: int
    """Position within its kind: the `episode` column of the database."""
    seed: int


def seeds_for(spec: TaskSpec, kind: str, count: int) -> list[int]:
    """The first `count` seeds of a kind; selection and evaluation seeds continue upwards past
    the spec's own (selection 100-199 and evaluation from 1000 are free of other groups), so a
    larger selection or evaluation never borrows another group's seeds."""
    if kind not in EPISODE_KINDS:
        raise ValueError(f"episode kind must be one of {EPISODE_KINDS}, got {kind!r}")
    group = {"diagnostic": spec.diagnostic_seeds, "selection": spec.selection_seeds,
             "eval": spec.eval_seeds}[kind]
    count = max(0, int(count))
    seeds = list(group[:count])
    if kind in ("selection", "eval"):
        nxt = max(group) + 1
        while len(seeds) < count:
            seeds.append(nxt)
            nxt += 1
    return seeds


def episode_plan(spec: TaskSpec, *, diagnostic: int, selection: int, evaluation: int) -> list[PlannedEpisode]:
    """Diagnostic episodes first (their table feeds the analysis), then selection, then eval."""
    counts = {"diagnostic": diagnostic, "selection": selection, "eval": evaluation}
    return [PlannedEpisode(kind, i, seed)
            for kind in EPISODE_KINDS
            for i, seed in enumerate(seeds_for(spec, kind, counts[kind]))]
