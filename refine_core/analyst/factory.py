"""Choosing an analyst by name, as `--analyst` does."""

from __future__ import annotations

import os

from refine_core.analyst.base import Analyst
from refine_core.analyst.config import AnalystConfig, load_config
from refine_core.analyst.prompts import DEFAULT_MAX_TEST_REQUESTS

ANALYST_NAMES: tuple[str, ...] = ("offline", "openai", "record", "replay")


def default_analyst_name(config: AnalystConfig | None = None) -> str:
    """"openai" when an endpoint or key is configured, else "offline"."""
    config = config if config is not None else load_config()
    return "openai" if config.has_endpoint else "offline"


def make_analyst(
    name: str,
    *,
    config: AnalystConfig | None = None,
    transcript: str | os.PathLike | None = None,
    max_test_requests: int = DEFAULT_MAX_TEST_REQUESTS,
    replay_mode: str = "exact",
) -> Analyst:
    """The analyst called `name`.

    `record` and `replay` need `transcript` (the JSONL path); `openai` records to it when one
    is given (`record` is the same with the transcript required). `replay_mode` is the
    transcript's `REPLAY_MODES` (exact or sequential). `max_test_requests` is the loop's cap on "more tests"
    answers per round; LLM analysts state it in the revision request, so pass the loop's
    value (and the same value when replaying a recording). Raises ValueError for an unknown
    name or a missing transcript, `ConfigError` when `openai`/`record` has no endpoint
    configured.
    """
    if name not in ANALYST_NAMES:
        raise ValueError(f"unknown analyst {name!r}; choose one of {', '.join(ANALYST_NAMES)}")
    if name in ("record", "replay") and transcript is None:
        raise ValueError(f"the {name} analyst needs a transcript path")
    if name == "offline":  # it reads the task from each call's spec
        from refine_core.analyst.offline import OfflineAnalyst

        return OfflineAnalyst()
    config = config if config is not None else load_config()
    if name == "replay":
        from refine_core.analyst.transcript import ReplayAnalyst

        return ReplayAnalyst(
            transcript,
            max_corrections=config.max_corrections,
            results_max_chars=config.results_max_chars,
            max_test_requests=max_test_requests,
            mode=replay_mode,
        )
    from refine_core.analyst.openai_analyst import OpenAIAnalyst

    live = OpenAIAnalyst(config, max_test_requests=max_test_requests)
    if name == "openai" and transcript is None:
        return live
    from refine_core.analyst.transcript import RecordingAnalyst

    return RecordingAnalyst(live, transcript, name=name)
