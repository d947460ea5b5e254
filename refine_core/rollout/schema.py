"""The rollout table's column schema: one object, derived from the task spec and the program.

Why one object: the prompt shows these names to the analyst before any number exists, the
rollout runner and the ROS logger write rows under them, the offline battery and the MCAP
export read them back. If any of those spelled a name itself, a renamed column would silently
become an empty one. Every column name of a rollout table is built here and nowhere else.

    run_id, round, kind, episode, seed, step        ids
    <observation column>                             every input coordinate (task spec names)
    latent_* / weight_*                              the program's info values
    mean_<action>, std_<action>                      the policy's Gaussian (std = row norm of L)
    act_<action>                                     executed action, after clipping
    expert_<action>                                  the expert's relabel (only when switched on)
    safe_<action>                                    what a robot's safety node sent (robots only)
    halted, rejected                                 1 when a stop went out instead of the step's
                                                     command / the robot's driver refused it
                                                     (robots only; NaN: unknown, e.g. dry run)
    reward, done
    next_<observation column>                        the observation after the step
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from refine_core.tasks.spec import TaskSpec

ID_COLUMNS = ("run_id", "round", "kind", "episode", "seed", "step")
OUTCOME_COLUMNS = ("reward", "done")
EXECUTION_COLUMNS = ("halted", "rejected")
"""What became of each step's command on a robot (with the safe_* columns)."""
EPISODE_KINDS = ("diagnostic", "selection", "eval")
"""The kinds of episode a round runs: the table the diagnostics read, the episodes that pick
the best round, and the episodes that are only reported. (The database also stores the
demonstration's steps as kind `demo`.)"""
ACTION_FAMILIES = ("mean", "std", "act", "expert", "safe")
"""The families of per-action columns, `<family>_<action>` (see the table above)."""
WEIGHT_PREFIX, LATENT_PREFIX = "weight_", "latent_"
INFO_PREFIXES = (WEIGHT_PREFIX, LATENT_PREFIX)
"""What a program's info keys start with: fitted weights and intermediate quantities."""
NEXT_PREFIX = "next_"


# -- the names, one function each: nothing else spells a prefix --------------------------------
def action_column(family: str, action: str) -> str:
    """The column of `action` in `family` (one of ACTION_FAMILIES), e.g. ``act_steer``."""
    if family not in ACTION_FAMILIES:
        raise ValueError(f"unknown column family {family!r}; families: {ACTION_FAMILIES}")
    return f"{family}_{action}"


def family_columns(columns: Iterable[str], family: str) -> list[str]:
    """The columns of `columns` in `family`, in their order."""
    head = action_column(family, "")
    return [c for c in columns if str(c).startswith(head)]


def next_column(column: str) -> str:
    """The column holding observation column `column` after the step."""
    return f"{NEXT_PREFIX}{column}"


def is_weight(key: str) -> bool:
    return str(key).startswith(WEIGHT_PREFIX)


def is_latent(key: str) -> bool:
    return str(key).startswith(LATENT_PREFIX)


def is_info_key(key: str) -> bool:
    """A program's info key (a weight or a latent), which is a table column as it is."""
    return str(key).startswith(INFO_PREFIXES)


def info_name(key: str) -> str:
    """An info key without its prefix (``latent_speed_error`` -> ``speed_error``)."""
    return next((str(key)[len(p):] for p in INFO_PREFIXES if str(key).startswith(p)), str(key))


def analyst_renames(spec: TaskSpec) -> Mapping[str, str]:
    """Stored rollout-table column -> the column the analyst's code reads, for `spec`'s
    description variant (`TaskSpec.analyst_columns`): each renamed observation column and its
    next-step twin. Empty when nothing is renamed."""
    out: dict[str, str] = {}
    for stored, shown in spec.analyst_columns:
        out[stored] = shown
        out[next_column(stored)] = next_column(shown)
    return out


@dataclass(frozen=True)
class RolloutSchema:
    """The columns of one program's rollout table (the order is the table's order)."""

    observation_columns: tuple[str, ...]
    action_names: tuple[str, ...]
    info_keys: tuple[str, ...] = ()
    """The program's `weight_*` / `latent_*` keys, in the order the program returns them."""
    expert: bool = False
    """Expert relabels of every state (privileged information: off unless asked for)."""
    safe: bool = False
    """The safety node's command per step (real robots)."""

    @classmethod
    def for_task(cls, spec: TaskSpec, info_keys: Sequence[str] = (), *, expert: bool = False,
                 safe: bool = False) -> RolloutSchema:
        return cls(tuple(spec.observation_columns), tuple(spec.action_names), tuple(info_keys),
                   expert=expert, safe=safe)

    # -- one family of names each -----------------------------------------------------------
    def family(self, family: str) -> list[str]:
        """Every action's column in `family`, in action order."""
        return [action_column(family, a) for a in self.action_names]

    def mean(self) -> list[str]:
        return self.family("mean")

    def std(self) -> list[str]:
        return self.family("std")

    def act(self) -> list[str]:
        return self.family("act")

    def expert_columns(self) -> list[str]:
        return self.family("expert")

    def safe_columns(self) -> list[str]:
        return self.family("safe")

    def next_observation(self) -> list[str]:
        return [next_column(c) for c in self.observation_columns]

    @property
    def weights(self) -> list[str]:
        return [k for k in self.info_keys if is_weight(k)]

    @property
    def latents(self) -> list[str]:
        return [k for k in self.info_keys if is_latent(k)]

    # -- whole rows -------------------------------------------------------------------------
    def policy_step(self) -> list[str]:
        """What the policy produces per step, in the order the ROS learner publishes it."""
        return [*self.mean(), *self.std(), *self.act(), *self.info_keys]

    @property
    def columns(self) -> list[str]:
        """Every column of the table, in order: what an analyst sees before any numbers."""
        columns = [*ID_COLUMNS, *self.observation_columns, *self.info_keys,
                   *self.mean(), *self.std(), *self.act()]
        if self.expert:
            columns += self.expert_columns()
        if self.safe:
            columns += [*self.safe_columns(), *EXECUTION_COLUMNS]
        return columns + [*OUTCOME_COLUMNS, *self.next_observation()]
