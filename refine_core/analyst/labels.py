"""The plain-language labels every output uses for who analysed a run and what it could see.

Why one module: the README, `refine run`, `refine report` and the experiment tables must say the
same thing about the offline analyst and about expert relabels, and wording copied by hand
drifts. The texts are plain strings so any output (terminal, HTML, Markdown) can use them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Says what the offline analyst is and what its results are worth.
OFFLINE_ANALYST = (
    "Offline analyst: a deterministic rule-based program, not an LLM. Its revisions are "
    "pre-written programs from a catalogue for the two bundled tasks (car_racing, door_open), "
    "chosen by fixed rules from the diagnostic results. Runs and comparison rows produced with "
    "it demonstrate the machinery; they are not LLM results and not evidence for the method."
)

#: For comparison tables: which rows the offline analyst produced.
OFFLINE_ROWS = (
    "Rows refined by the offline analyst are not LLM results: their structures are "
    "pre-written programs for the two bundled tasks."
)

#: For replayed runs: the answers came from a recorded LLM session, not a live one.
REPLAY_ANALYST = (
    "Replay analyst: every answer comes from a recorded transcript of an earlier LLM session, "
    "so this run repeats that session's decisions; no model was queried."
)


def replay_label(model: str, transcript: object, mode: str) -> str:
    """What a replayed run is, with the model whose answers it repeats."""
    how = ("only identical requests are answered" if mode == "exact" else
           "each role's requests get the recorded answers in recorded order, and requests that differ "
           "from the recorded ones are counted")
    return (f"Replay of a language model's recorded answers: every answer comes from {transcript}, recorded "
            f"from the model {model}; no model is queried now ({mode} mode: {how}).")

EXPERT_ON = (
    "Expert relabels: ON. The diagnostic tables hold expert_<action> columns (the scripted "
    "expert's action in the policy's own states). This is privileged information that the "
    "published comparison does not use and that does not exist on a robot."
)
EXPERT_OFF = (
    "Expert relabels: off, as in the published comparison (no expert_<action> columns)."
)
EXPERT_UNKNOWN = "Expert relabels: not recorded for this run."

#: Config keys under which a run may record whether expert relabels were on.
EXPERT_CONFIG_KEYS = ("expert_relabels", "label_expert", "expert_labels")


DEMO_ACCESS_ON = (
    "Demonstration in the diagnostics: ON. The analysis code received the demonstration table "
    "(`demo`) besides the rollout table (`df`); the published method gives it the rollout only, "
    "so results with it on are a departure."
)
DEMO_ACCESS_OFF = (
    "Demonstration in the diagnostics: off. The analysis code received the rollout table (`df`) "
    "only, as published."
)
DEMO_ACCESS_UNKNOWN = "Demonstration in the diagnostics: not recorded for this run."
DEMO_ACCESS_KEY = "diagnostics_see_demo"


def demo_access_label(on: bool | None) -> str:
    if on is None:
        return DEMO_ACCESS_UNKNOWN
    return DEMO_ACCESS_ON if on else DEMO_ACCESS_OFF


def demo_access_setting(config: Mapping[str, Any] | None) -> bool | None:
    """Whether a run's analysis code read the demonstration: the recorded setting; on for a
    refinement run recorded before the setting existed (every one had it on); None when the
    configuration is not a refinement run's."""
    if not isinstance(config, Mapping):
        return None
    if isinstance(config.get(DEMO_ACCESS_KEY), bool):
        return config[DEMO_ACCESS_KEY]
    return True if "max_rounds" in config else None


def analyst_label(name: str | None) -> str:
    """The label for an analyst by its recorded name ("" for a live LLM, which needs none)."""
    if name == "offline":
        return OFFLINE_ANALYST
    if name == "replay":
        return REPLAY_ANALYST
    return ""


def describe_analyst(analyst: Any) -> str:
    """One line saying who answers a run: the offline rules, a replay (of which model) or a
    live language model (which one, and whether it is recorded)."""
    name = getattr(analyst, "name", "")
    if name == "offline":
        return OFFLINE_ANALYST
    if hasattr(analyst, "replay_report"):
        report = analyst.replay_report()
        return replay_label(report["model"], report["transcript"], report["mode"])
    backend = getattr(analyst, "backend", None)
    model = getattr(backend, "model", None)
    recorded = getattr(backend, "path", None)
    text = f"analyst: {name}, a language model ({model or 'model unknown'})"
    return text + (f"; every exchange is recorded to {recorded}" if recorded is not None else "")


def expert_label(on: bool | None) -> str:
    if on is None:
        return EXPERT_UNKNOWN
    return EXPERT_ON if on else EXPERT_OFF


def expert_setting(config: Mapping[str, Any] | None) -> bool | None:
    """Whether a run's recorded configuration switched expert relabels on (None if it does
    not say)."""
    for key in EXPERT_CONFIG_KEYS:
        if isinstance(config, Mapping) and isinstance(config.get(key), bool):
            return config[key]
    return None
