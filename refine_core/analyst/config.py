"""Settings for LLM analysts: which endpoint and model, how long to wait, how often to retry.

Sources, strongest first: command-line flags, environment variables, a YAML or JSON config
file, defaults. The API key is read from the environment only (a flag would show it in the
process list, a file tends to get committed); a config file may name the variable to read
it from with `api_key_env`. The key is never part of `repr`, `to_dict` or any message.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from refine_core.analyst.prompts import RESULTS_MAX_CHARS

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
CONFIG_ENV = "REFINE_ANALYST_CONFIG"


class ConfigError(ValueError):
    """A setting has the wrong type or value, or a config file cannot be read."""


class Secret:
    """A string that does not print, serialise or pickle itself.

    `dataclasses.asdict`, `json.dumps`, f-strings and `pickle` are the usual ways a key
    reaches a log, a database row or another process; each of them gets a mask or an error
    here. `reveal()` is the single way to read the value.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ConfigError("api_key must be a non-empty string")
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __deepcopy__(self, memo: dict) -> Secret:
        return self

    def __reduce__(self) -> Any:
        raise TypeError("refusing to pickle an API key; pass it through the environment")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))


@dataclass(frozen=True)
class AnalystConfig:
    model: str = "gpt-5-mini"
    """Model name sent with every request."""
    base_url: str | None = None
    """OpenAI-compatible endpoint, e.g. http://localhost:11434/v1; None means OpenAI's own."""
    api_key: Secret | None = field(default=None, repr=False, compare=False)
    """Taken from the environment; a plain string given here is wrapped in `Secret`."""
    temperature: float | None = None
    """Sampling temperature; None leaves the server default (reasoning models reject it)."""
    reasoning_effort: str | None = field(default=None, metadata={"choices": REASONING_EFFORTS})
    """Reasoning effort for reasoning models; None omits it."""
    max_completion_tokens: int | None = None
    """Cap on generated tokens per call; None leaves the server default."""
    timeout_s: float = 300.0
    """Seconds to wait for one HTTP response before retrying."""
    max_attempts: int = 5
    """HTTP attempts per call (429, 5xx, timeouts and connection errors are retried)."""
    backoff_s: float = 2.0
    """First retry delay; doubles per attempt, with random jitter, capped by backoff_max_s."""
    backoff_max_s: float = 60.0
    """Longest delay between two attempts (also caps a server's Retry-After)."""
    max_corrections: int = 2
    """How many times an unusable answer is sent back with the parse error."""
    results_max_chars: int = RESULTS_MAX_CHARS
    """Diagnostic output longer than this is shortened in the revision prompt."""

    def __post_init__(self) -> None:
        if self.api_key is not None and not isinstance(self.api_key, Secret):
            object.__setattr__(self, "api_key", Secret(self.api_key))
        _check(self)

    @property
    def has_endpoint(self) -> bool:
        """True when an endpoint or key is configured, i.e. an LLM can be reached."""
        return bool(self.base_url) or bool(self.api_key)

    def to_dict(self) -> dict[str, Any]:
        """Everything except the key (for the run database and reports)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "api_key"}
        out["api_key_set"] = self.api_key is not None
        return out



def _check(cfg: AnalystConfig) -> None:
    if not isinstance(cfg.model, str) or not cfg.model.strip():
        raise ConfigError("model must be a non-empty string")
    if cfg.base_url is not None and not (
        isinstance(cfg.base_url, str) and cfg.base_url.startswith(("http://", "https://"))
    ):
        raise ConfigError(f"base_url must start with http:// or https://, got {cfg.base_url!r}")
    if cfg.temperature is not None and not (0.0 <= cfg.temperature <= 2.0):
        raise ConfigError(f"temperature must be in [0, 2], got {cfg.temperature}")
    if cfg.reasoning_effort is not None and cfg.reasoning_effort not in REASONING_EFFORTS:
        raise ConfigError(
            f"reasoning_effort must be one of {', '.join(REASONING_EFFORTS)}, "
            f"got {cfg.reasoning_effort!r}"
        )
    positive = {"timeout_s": cfg.timeout_s, "backoff_max_s": cfg.backoff_max_s}
    for name, value in positive.items():
        if not value > 0:
            raise ConfigError(f"{name} must be positive, got {value}")
    if cfg.backoff_s < 0:
        raise ConfigError(f"backoff_s must be >= 0, got {cfg.backoff_s}")
    if cfg.max_attempts < 1:
        raise ConfigError(f"max_attempts must be >= 1, got {cfg.max_attempts}")
    if cfg.max_corrections < 0:
        raise ConfigError(f"max_corrections must be >= 0, got {cfg.max_corrections}")
    if cfg.max_completion_tokens is not None and cfg.max_completion_tokens < 1:
        raise ConfigError("max_completion_tokens must be >= 1")
    if cfg.results_max_chars < 100:
        raise ConfigError("results_max_chars must be >= 100")


_TYPES: dict[str, type] = {
    "model": str,
    "base_url": str,
    "temperature": float,
    "reasoning_effort": str,
    "max_completion_tokens": int,
    "timeout_s": float,
    "max_attempts": int,
    "backoff_s": float,
    "backoff_max_s": float,
    "max_corrections": int,
    "results_max_chars": int,
}

# Environment variable -> field. OPENAI_* are the names the openai package itself reads.
ENV_VARS: dict[str, str] = {
    "OPENAI_BASE_URL": "base_url",
    "REFINE_MODEL": "model",
    "REFINE_TEMPERATURE": "temperature",
    "REFINE_REASONING_EFFORT": "reasoning_effort",
    "REFINE_MAX_COMPLETION_TOKENS": "max_completion_tokens",
    "REFINE_LLM_TIMEOUT": "timeout_s",
    "REFINE_LLM_MAX_ATTEMPTS": "max_attempts",
    "REFINE_LLM_MAX_CORRECTIONS": "max_corrections",
}


def _coerce(name: str, value: Any, source: str) -> Any:
    kind = _TYPES[name]
    if value is None:
        return None
    try:
        if kind is float and not isinstance(value, bool):
            return float(value)
        if kind is int and not isinstance(value, bool):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if kind is str and isinstance(value, str):
            return value.strip()
    except (TypeError, ValueError):
        pass
    raise ConfigError(f"{source}: {name} must be {kind.__name__}, got {value!r}")


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Settings from a YAML (.yaml/.yml) or JSON file; unknown keys are an error."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read analyst config {path}: {exc.strerror or exc}") from None
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # yaml.YAMLError / json.JSONDecodeError
        raise ConfigError(f"analyst config {path} is not valid: {exc}") from None
    if data is None:
        return {}
    if isinstance(data, dict) and isinstance(data.get("analyst"), dict) and len(data) == 1:
        data = data["analyst"]
    if not isinstance(data, dict):
        raise ConfigError(f"analyst config {path} must be a mapping of settings")
    if "api_key" in data:
        raise ConfigError(
            f"analyst config {path} contains api_key; keep the key in the environment "
            "(OPENAI_API_KEY, or name another variable with api_key_env)"
        )
    allowed = set(_TYPES) | {"api_key_env"}
    unknown = sorted(set(map(str, data)) - allowed)
    if unknown:
        raise ConfigError(f"analyst config {path}: unknown settings {', '.join(unknown)}")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "api_key_env":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"analyst config {path}: api_key_env must be a variable name")
            out[key] = value
        else:
            out[key] = _coerce(key, value, str(path))
    return out


def load_config(
    path: str | os.PathLike | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> AnalystConfig:
    """Defaults, then the file (`path`, else $REFINE_ANALYST_CONFIG), then the environment,
    then `overrides` (flag values; None entries are ignored)."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    file_path = path if path is not None else env.get(CONFIG_ENV) or None
    key_env = "OPENAI_API_KEY"
    if file_path is not None:
        from_file = read_config_file(file_path)
        key_env = from_file.pop("api_key_env", key_env)
        values.update(from_file)
    for var, name in ENV_VARS.items():
        raw = env.get(var)
        if raw is not None and raw.strip() != "":
            values[name] = _coerce(name, raw, f"${var}")
    for name, value in (overrides or {}).items():
        if name not in _TYPES:
            raise ConfigError(f"unknown analyst setting {name!r}")
        if value is not None:
            values[name] = _coerce(name, value, f"--{FLAG_PREFIX}{name.replace('_', '-')}")
    key = env.get(key_env) or None
    if key is not None:
        key = key.strip() or None
    return AnalystConfig(api_key=key, **values)


FLAG_PREFIX = "llm-"
"""The analyst's flags are its fields with this prefix (`--llm-model`, `--llm-timeout-s`): a
command that takes them also takes the loop's, and both have a `max_attempts`."""
OLD_FLAGS = {"model": ("--model",), "base_url": ("--base-url",), "temperature": ("--temperature",),
             "reasoning_effort": ("--reasoning-effort",), "timeout_s": ("--llm-timeout",)}
"""Spellings of the flags before they were generated from the fields (deprecated, still accepted)."""


def _env_help() -> dict[str, str]:
    return {name: f"(env {var}) " for var, name in ENV_VARS.items()}


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the analyst flags (every field but the key, `--llm-<field>`) and --analyst-config
    FILE to a command's parser."""
    from refine_core.flags import add_flags

    group = parser.add_argument_group("LLM analyst (API key from $OPENAI_API_KEY)")
    group.add_argument("--analyst-config", metavar="FILE", default=None,
                       help=f"YAML or JSON analyst settings (env {CONFIG_ENV})")
    add_flags(group, AnalystConfig, exclude=("api_key",), prefix=FLAG_PREFIX, aliases=OLD_FLAGS,
              extra_help=_env_help())


def config_from_args(
    args: argparse.Namespace, env: Mapping[str, str] | None = None
) -> AnalystConfig:
    """The config for a parsed command line built with `add_config_arguments`."""
    from refine_core.flags import given

    overrides = given(args, AnalystConfig, prefix=FLAG_PREFIX)
    return load_config(getattr(args, "analyst_config", None), env=env, overrides=overrides)
