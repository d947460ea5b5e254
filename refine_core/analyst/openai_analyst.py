"""The LLM analyst: prompts and parsing over a chat backend, and the OpenAI-compatible backend.

`LLMAnalyst` turns each question into chat messages, asks its backend, parses the answer
and, when the answer is unusable, sends the parse error back (bounded). It does not know
whether the backend is a live endpoint, a recorder or a transcript. `OpenAIChatBackend`
talks to any OpenAI-compatible server through the `openai` package, with its own bounded
retries (the client's built-in retries are switched off so that every attempt is seen and
logged here) and redaction of the API key from everything it returns or logs.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from refine_core.analyst import parser, prompts
from refine_core.analyst.base import (
    Analyst,
    ChatBackend,
    ChatResult,
    Conversation,
    Decision,
    DiagnosticsAnswer,
    LLMCall,
    ProgramAnswer,
)
from refine_core.analyst.config import AnalystConfig, ConfigError

if TYPE_CHECKING:
    from refine_core.tasks.spec import TaskSpec

log = logging.getLogger(__name__)

REDACTED = "[REDACTED]"
_KEY_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[^\s'\",}]+"),
    re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),
    re.compile(r"(?i)(api[_-]?key['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+"),
)


def redact(text: str, secrets: tuple[str, ...] = (), *, patterns: bool = True) -> str:
    """`text` with every secret replaced and, with `patterns`, also bearer tokens and
    key-looking strings (for error messages; model answers only lose the exact secrets, so
    prose such as "the bearer of" survives)."""
    if not text:
        return text
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    if not patterns:
        return text
    for pattern in _KEY_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text


class LLMAnalyst(Analyst):
    """An analyst whose answers come from a chat backend."""

    is_llm = True

    def __init__(
        self,
        backend: ChatBackend,
        *,
        name: str = "llm",
        max_corrections: int = 2,
        results_max_chars: int = prompts.RESULTS_MAX_CHARS,
        max_test_requests: int = prompts.DEFAULT_MAX_TEST_REQUESTS,
    ) -> None:
        if max_corrections < 0:
            raise ValueError("max_corrections must be >= 0")
        if max_test_requests < 0:
            raise ValueError("max_test_requests must be >= 0")
        self.backend = backend
        self.name = name
        self.max_corrections = max_corrections
        self.results_max_chars = results_max_chars
        self.max_test_requests = max_test_requests

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, model={self.backend.model!r})"

    def _ask(
        self,
        role: str,
        messages: prompts.Messages,
        parse: Callable[[str], Any],
        expected: str,
    ) -> tuple[Any | None, list[LLMCall], str | None, Conversation]:
        """Ask, parse, and on an unusable answer ask again with the problem stated.

        Returns (parsed result or None, the calls made, the final error or None, the
        conversation). The conversation keeps the corrections: it is what the model saw, and a
        continued exchange must show the model its own words. It ends with the model's last
        answer whenever there was one."""
        calls: list[LLMCall] = []
        history = list(messages)
        problem = "no answer"
        for attempt in range(1, self.max_corrections + 2):
            result = self.backend.complete(history, role)
            call = LLMCall(
                role=role,
                model=result.model,
                prompt=json.dumps(history, ensure_ascii=False),
                response=result.text or "",
                tokens_in=int(result.tokens_in or 0),
                tokens_out=int(result.tokens_out or 0),
                latency_s=float(result.latency_s or 0.0),
                error=result.error,
                attempt=attempt,
                endpoint=result.endpoint,
            )
            calls.append(call)
            if result.error is not None or result.text is None:
                return None, calls, result.error or "the endpoint returned no text", history
            answered = history + [{"role": "assistant", "content": result.text}]
            parsed = parse(result.text)
            if parsed.error is None:
                return parsed, calls, None, answered
            call.error = f"unusable answer: {parsed.error}"
            problem = parsed.error
            log.info("%s answer %d unusable: %s", role, attempt, problem)
            if attempt == self.max_corrections + 1:
                history = answered
                break
            history = answered + [prompts.correction_message(problem, expected)]
        return None, calls, f"unusable answer after {len(calls)} attempt(s): {problem}", history

    def generate(
        self,
        spec: TaskSpec,
        *,
        failed_program: str | None = None,
        error: str | None = None,
        context: Conversation | None = None,
    ) -> ProgramAnswer:
        if failed_program is None and error is None:
            role, messages = "generate", prompts.generation_messages(spec)
        else:
            role = "regenerate"
            messages = prompts.regeneration_messages(
                spec, failed_program=failed_program, error=error, context=context
            )
        parsed, calls, err, conversation = self._ask(
            role,
            messages,
            lambda text: parser.parse_program(text, spec.policy_class),
            prompts.PROGRAM_FORMAT,
        )
        if parsed is None:
            return ProgramAnswer(None, _last_reasoning(calls), calls, err, conversation)
        return ProgramAnswer(parsed.code, parsed.reasoning, calls, None, conversation)

    def diagnose(self, spec: TaskSpec, program: str, schema: list[str], *, demo: bool = False) -> DiagnosticsAnswer:
        messages = prompts.diagnostics_messages(spec, program, list(schema), demo=demo)
        parsed, calls, err, conversation = self._ask(
            "diagnose",
            messages,
            lambda text: parser.parse_diagnostics(text, spec.policy_class),
            prompts.DIAGNOSTICS_FORMAT,
        )
        if parsed is None:
            return DiagnosticsAnswer(None, _last_reasoning(calls), calls, err, conversation)
        return DiagnosticsAnswer(parsed.code, parsed.reasoning, calls, None, conversation)

    def revise(
        self,
        spec: TaskSpec,
        program: str,
        results: str,
        *,
        conversation: Conversation | None = None,
        demo: bool = False,
    ) -> Decision:
        messages = prompts.revision_messages(
            spec,
            program,
            results,
            conversation=conversation,
            results_max_chars=self.results_max_chars,
            max_test_requests=self.max_test_requests,
            demo=demo,
        )
        parsed, calls, err, exchange = self._ask(
            "revise",
            messages,
            lambda text: parser.parse_decision(text, spec.policy_class),
            prompts.revision_format(demo=demo),
        )
        if parsed is None:
            return Decision("stop", reasoning=_last_reasoning(calls), calls=calls, error=err,
                            conversation=exchange)
        return Decision(parsed.kind, parsed.program, parsed.tests, parsed.reasoning, calls, None,
                        exchange)


def _last_reasoning(calls: list[LLMCall]) -> str:
    return parser.prose(calls[-1].response) if calls and calls[-1].response else ""


class OpenAIChatBackend:
    """Chat completions against an OpenAI-compatible endpoint, retried with backoff."""

    def __init__(
        self,
        config: AnalystConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not config.has_endpoint:
            raise ConfigError(
                "no LLM endpoint configured: set OPENAI_API_KEY (and OPENAI_BASE_URL or "
                "--base-url for a server other than OpenAI's)"
            )
        import openai

        self._openai = openai
        self.config = config
        self.model = config.model
        key = config.api_key.reveal() if config.api_key is not None else None
        self._secrets = (key,) if key else ()
        self._sleep = sleep
        self._rng = rng or random.Random()
        # Local servers (vLLM, Ollama, llama.cpp) accept any key; the client insists on one.
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=key or "no-key",
            timeout=config.timeout_s,
            max_retries=0,
        )

    def __repr__(self) -> str:
        return f"OpenAIChatBackend(model={self.model!r}, base_url={self.config.base_url!r})"

    def _request_args(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        args: dict[str, Any] = {"model": self.config.model, "messages": messages}
        if self.config.temperature is not None:
            args["temperature"] = self.config.temperature
        if self.config.reasoning_effort is not None:
            args["reasoning_effort"] = self.config.reasoning_effort
        if self.config.max_completion_tokens is not None:
            args["max_completion_tokens"] = self.config.max_completion_tokens
        return args

    def _classify(self, exc: Exception) -> tuple[bool, float | None, str]:
        """(retryable, server-suggested delay, message) for a failed request."""
        openai = self._openai
        if isinstance(exc, openai.APITimeoutError):
            return True, None, f"request timed out after {self.config.timeout_s:g} s"
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f": {type(cause).__name__}: {cause}" if cause else ""
            return True, None, f"connection error{detail}"
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            hint = _retry_after(exc)
            message = f"HTTP {status}: {_short(str(exc.message))}"
            return status in (408, 409, 429) or status >= 500, hint, message
        if isinstance(exc, ValueError):  # e.g. a 200 whose body is not JSON
            return True, None, f"malformed response: {type(exc).__name__}: {_short(str(exc))}"
        if isinstance(exc, openai.OpenAIError):
            return False, None, f"{type(exc).__name__}: {_short(str(exc))}"
        return False, None, f"unexpected client error {type(exc).__name__}: {_short(str(exc))}"

    def _delay(self, attempt: int, hint: float | None) -> float:
        base = min(self.config.backoff_max_s, self.config.backoff_s * 2 ** (attempt - 1))
        delay = base * self._rng.uniform(0.5, 1.0)
        if hint is not None:
            delay = max(delay, min(hint, self.config.backoff_max_s))
        return delay

    def complete(self, messages: list[dict[str, str]], role: str) -> ChatResult:
        args = self._request_args(messages)
        start = time.monotonic()
        error = "no attempt made"
        attempt = 0
        for attempt in range(1, self.config.max_attempts + 1):
            try:
                response = self._client.chat.completions.create(**args)
            except Exception as exc:  # every failure becomes a result, never a crash
                retryable, hint, message = self._classify(exc)
                error = redact(message, self._secrets)
                if not retryable or attempt == self.config.max_attempts:
                    break
                delay = self._delay(attempt, hint)
                log.warning(
                    "%s request attempt %d/%d failed (%s); retrying in %.2f s",
                    role, attempt, self.config.max_attempts, error, delay,
                )
                self._sleep(delay)
                continue
            return self._result(response, time.monotonic() - start, attempt)
        log.warning("%s request failed after %d attempt(s): %s", role, attempt, error)
        return ChatResult(
            text=None,
            model=self.config.model,
            latency_s=time.monotonic() - start,
            error=f"{error} (after {attempt} attempt(s))",
            attempts=attempt,
        )

    def _result(self, response: Any, latency: float, attempts: int) -> ChatResult:
        try:
            choice = response.choices[0]
            text = choice.message.content or ""
            finish = getattr(choice, "finish_reason", None)
        except (AttributeError, IndexError, TypeError):
            return ChatResult(None, self.config.model, latency_s=latency, attempts=attempts,
                              error="malformed response: no choices[0].message")
        usage = getattr(response, "usage", None)
        fingerprint = getattr(response, "system_fingerprint", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        if finish == "length":
            log.warning("answer truncated at the completion token limit")
        log.info("answer in %.1f s after %d attempt(s): %d tokens in, %d out",
                 latency, attempts, tokens_in, tokens_out)
        return ChatResult(
            text=redact(text, self._secrets, patterns=False),
            model=str(getattr(response, "model", None) or self.config.model),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            latency_s=latency,
            attempts=attempts,
            endpoint=str(fingerprint) if fingerprint else None,
        )


def _retry_after(exc: Any) -> float | None:
    """The server's requested delay in seconds (retry-after-ms or retry-after), if any."""
    try:
        headers = exc.response.headers
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000.0)
        value = headers.get("retry-after")
        return max(0.0, float(value)) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


def _short(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


class OpenAIAnalyst(LLMAnalyst):
    """The analyst for a live OpenAI-compatible endpoint."""

    def __init__(
        self,
        config: AnalystConfig,
        *,
        backend: ChatBackend | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_test_requests: int = prompts.DEFAULT_MAX_TEST_REQUESTS,
    ) -> None:
        super().__init__(
            backend or OpenAIChatBackend(config, sleep=sleep),
            name="openai",
            max_corrections=config.max_corrections,
            results_max_chars=config.results_max_chars,
            max_test_requests=max_test_requests,
        )
        self.config = config
