"""Analysts: who writes policy programs, diagnostics and revisions (LLM, replay, offline).

The loop uses `make_analyst(name, ...)` and the three methods of `Analyst`; see base.py.
"""

from refine_core.analyst.base import (
    Analyst,
    AnalystError,
    ChatBackend,
    ChatResult,
    Conversation,
    Decision,
    DiagnosticsAnswer,
    LLMCall,
    ProgramAnswer,
)
from refine_core.analyst.config import AnalystConfig, ConfigError, load_config
from refine_core.analyst.factory import ANALYST_NAMES, default_analyst_name, make_analyst
from refine_core.analyst.openai_analyst import LLMAnalyst, OpenAIAnalyst, OpenAIChatBackend
from refine_core.analyst.transcript import (
    RecordingAnalyst,
    ReplayAnalyst,
    TranscriptError,
    TranscriptMiss,
)

__all__ = [
    "ANALYST_NAMES",
    "Analyst",
    "AnalystConfig",
    "AnalystError",
    "ChatBackend",
    "ChatResult",
    "ConfigError",
    "Conversation",
    "Decision",
    "DiagnosticsAnswer",
    "LLMAnalyst",
    "LLMCall",
    "OpenAIAnalyst",
    "OpenAIChatBackend",
    "ProgramAnswer",
    "RecordingAnalyst",
    "ReplayAnalyst",
    "TranscriptError",
    "TranscriptMiss",
    "default_analyst_name",
    "load_config",
    "make_analyst",
]
