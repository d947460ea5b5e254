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


class SeedRangeError(ValueError):
    """More seeds of a kind were asked for than fit below the next group's seeds."""


def seeds_for(spec: TaskSpec, kind: str, count: int) -> list[int]:
    """The first `count` seeds of a kind; selection and evaluation seeds continue upwards past
    the spec's own, up to (not into) the next seed another group uses (the demonstration's
    included): the car's selection 100-199 and evaluation from 1000, the door's evaluation
    0-99 and selection 100-199. A larger selection or evaluation never borrows another group's
    seeds: asking for more than fit is a `SeedRangeError`."""
    if kind not in EPISODE_KINDS:
        raise ValueError(f"episode kind must be one of {EPISODE_KINDS}, got {kind!r}")
    groups = {"diagnostic": spec.diagnostic_seeds, "selection": spec.selection_seeds, "eval": spec.eval_seeds}
    group = groups[kind]
    count = max(0, int(count))
    seeds = list(group[:count])
    if kind in ("selection", "eval") and len(seeds) < count:
        others = {spec.demo_seed, *(s for k, g in groups.items() if k != kind for s in g)}
        above = [s for s in others if s > max(group)]
        limit = min(above) if above else None
        nxt = max(group) + 1
        while len(seeds) < count:
            if limit is not None and nxt >= limit:
                raise SeedRangeError(f"{spec.name}: {count} {kind} seeds do not fit below seed {limit}, which "
                                     f"another group uses; at most {len(seeds)}")
            seeds.append(nxt)
            nxt += 1
    return seeds


def episode_plan(spec: TaskSpec, *, diagnostic: int, selection: int, evaluation: int) -> list[PlannedEpisode]:
    """Diagnostic episodes first (their table feeds the analysis), then selection, then eval."""
    counts = {"diagnostic": diagnostic, "selection": selection, "eval": evaluation}
    return [PlannedEpisode(kind, i, seed)
            for kind in EPISODE_KINDS
            for i, seed in enumerate(seeds_for(spec, kind, counts[kind]))]
