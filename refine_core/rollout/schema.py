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

from collections.abc import Sequence
from dataclasses import dataclass

from refine_core.tasks.spec import TaskSpec

ID_COLUMNS = ("run_id", "round", "kind", "episode", "seed", "step")
OUTCOME_COLUMNS = ("reward", "done")
EXECUTION_COLUMNS = ("halted", "rejected")
"""What became of each step's command on a robot (with the safe_* columns)."""
EPISODE_KINDS = ("diagnostic", "selection", "eval")
"""The kinds of episode a round runs: the table the diagnostics read, the episodes that pick
the best round, and the episodes that are only reported."""


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
    def mean(self) -> list[str]:
        return [f"mean_{a}" for a in self.action_names]

    def std(self) -> list[str]:
        return [f"std_{a}" for a in self.action_names]

    def act(self) -> list[str]:
        return [f"act_{a}" for a in self.action_names]

    def expert_columns(self) -> list[str]:
        return [f"expert_{a}" for a in self.action_names]

    def safe_columns(self) -> list[str]:
        return [f"safe_{a}" for a in self.action_names]

    def next_observation(self) -> list[str]:
        return [f"next_{c}" for c in self.observation_columns]

    @property
    def weights(self) -> list[str]:
        return [k for k in self.info_keys if k.startswith("weight_")]

    @property
    def latents(self) -> list[str]:
        return [k for k in self.info_keys if k.startswith("latent_")]

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

    def data_columns(self) -> list[str]:
        """`columns` without the id columns (what one step contributes)."""
        return [c for c in self.columns if c not in ID_COLUMNS]


def action_of(column: str, prefix: str) -> str | None:
    """The action name in a `<prefix>_<action>` column, or None if it has another prefix."""
    head = f"{prefix}_"
    return column[len(head):] if column.startswith(head) else None
