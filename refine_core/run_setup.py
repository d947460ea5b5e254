"""How a refinement run is set up, and how a replay sets itself up like the run it replays.

Why one module: `refine run` and the ROS analysis node start the same method from different
front ends (a command line, node parameters), and a recorded run must be replayable from
either. A recording writes the run's settings as the first line of its transcript
(`analyst.transcript.start_transcript`): the task, the description variant, the start
program (its text, when the run began from a given program), the budgets that shape the
requests (rounds, 'more tests' cap, corrections, results length) and the episode counts.
A replay takes every setting it is not explicitly given from there, so
`refine run --analyst replay --transcript FILE` needs nothing else.

Runs recorded before the diagnostics' access to the demonstration became an option
(`RefineConfig.diagnostics_see_demo`) have no such setting: they all had it on, and the
description they recorded as "published" is the wording now kept as `legacy_published`
(it named the simulators). `upgrade_recorded` says so, so a replay or a resume of such a run
sends the words and gives the code the tables the run had.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from refine_core.loop import RefineConfig, StartProgram
from refine_core.tasks.spec import LEGACY_VARIANT

#: RefineConfig fields a recording keeps (what shapes the requests, and the episode counts).
RECORDED_LOOP_FIELDS = ("max_rounds", "max_attempts", "max_test_requests", "diagnostic_episodes",
                        "selection_episodes", "eval_episodes", "max_steps", "action_mode", "expert_labels",
                        "rl_resets", "diagnostics_see_demo")
DEMO_ACCESS = "diagnostics_see_demo"
"""The setting whose absence marks a run recorded before it existed (see the module's docstring)."""
#: AnalystConfig fields a recording keeps (they change the requests an LLM analyst sends).
RECORDED_ANALYST_FIELDS = ("max_corrections", "results_max_chars")


def upgrade_recorded(settings: Mapping[str, Any] | None) -> dict | None:
    """A recorded run's settings (a transcript's first line, or a run's stored config) as the
    run was really set up: one recorded before the demonstration access was an option had it
    on, and its "published" description was today's `legacy_published`. Settings that are not
    a refinement run's (no `max_rounds`) are returned as they are."""
    if settings is None:
        return None
    out = dict(settings)
    if DEMO_ACCESS not in out and "max_rounds" in out:
        out[DEMO_ACCESS] = True
        if out.get("task_description") == "published":
            out["task_description"] = LEGACY_VARIANT
    return out


def recorded_settings(path: str | Path | None) -> dict | None:
    """The settings line of the transcript at `path`, upgraded (`upgrade_recorded`)."""
    from refine_core.analyst.transcript import read_settings

    return upgrade_recorded(read_settings(path)) if path else None


class StartProgramError(ValueError):
    """A start program that cannot be read."""


def start_from_file(path: str | Path) -> StartProgram:
    """The program in `path`, labelled with the file's name and its text's hash."""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StartProgramError(f"cannot read the start program {path}: {exc}") from None
    if not source.strip():
        raise StartProgramError(f"the start program {path} is empty")
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]
    return StartProgram(source, f"file {path.name} ({digest})")


def recorded_start(settings: Mapping[str, Any] | None) -> StartProgram | None:
    """The start program a recorded run began from (None: it asked for a zero-shot one)."""
    start = (settings or {}).get("start") or {}
    if start.get("kind") != "program" or not isinstance(start.get("source"), str):
        return None
    return StartProgram(start["source"], str(start.get("label") or "recorded start program"))


def recording_settings(task_name: str, description: str, config: RefineConfig, analyst_config: Any,
                       start: StartProgram | None, model: str | None = None) -> dict:
    """What a transcript's `run` line records about the run."""
    loop = asdict(config)
    settings: dict[str, Any] = {"task": task_name, "task_description": description,
                                **{k: loop[k] for k in RECORDED_LOOP_FIELDS}}
    for name in RECORDED_ANALYST_FIELDS:
        settings[name] = getattr(analyst_config, name, None)
    settings["model"] = model
    settings["start"] = ({**start.record(), "source": start.source} if start is not None else {"kind": "zero-shot"})
    return settings


def loop_settings(values: Mapping[str, Any], settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """`RefineConfig` keyword arguments: `values` (given explicitly), and for each recorded field
    not given, the recorded run's value (`settings`, a transcript's first line) when it has one;
    everything else keeps the dataclass's default."""
    out = dict(values)
    for key in RECORDED_LOOP_FIELDS:
        if key not in out and (settings or {}).get(key) is not None:
            out[key] = settings[key]
    return out
