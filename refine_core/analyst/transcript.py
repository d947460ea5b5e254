"""Record and replay LLM answers, so a run can be reproduced exactly without a network.

A transcript is JSONL, one line per chat request: `{hash, role, request, response, ...}`.
The hash covers the role and the request messages (canonical JSON), not the model or
endpoint, so a transcript recorded against one server replays anywhere. Recording happens
at the chat level (messages in, raw text out), so a replayed answer is parsed by the same
code as the live one and yields the same programs and decisions.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import defaultdict
from pathlib import Path

from refine_core.analyst import prompts
from refine_core.analyst.base import AnalystError, ChatBackend, ChatResult
from refine_core.analyst.openai_analyst import LLMAnalyst

TRANSCRIPT_VERSION = 1


class TranscriptError(AnalystError):
    """A transcript file is missing or malformed."""


class TranscriptMiss(TranscriptError):
    """The transcript has no answer for this request: the run has diverged from the one that
    was recorded (different task, program, code, prompts or settings)."""

    def __init__(self, key: str, role: str, path: Path) -> None:
        super().__init__(
            f"replay transcript {path} has no answer for the {role!r} request with hash "
            f"{key[:16]}; the run differs from the recorded one from this request on "
            "(record a new transcript with --analyst record)"
        )
        self.key = key
        self.role = role
        self.path = path


def request_hash(messages: list[dict[str, str]], role: str) -> str:
    """sha256 of the canonical JSON of the role and the messages."""
    canonical = json.dumps(
        {"role": role, "messages": messages},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class RecordingBackend:
    """Passes requests to `inner` and appends each request and answer to a transcript.

    Lines are flushed and fsynced one by one, so a killed run keeps everything it asked."""

    def __init__(self, inner: ChatBackend, path: str | os.PathLike) -> None:
        self.inner = inner
        self.model = inner.model
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def complete(self, messages: list[dict[str, str]], role: str) -> ChatResult:
        result = self.inner.complete(messages, role)
        line = {
            "v": TRANSCRIPT_VERSION,
            "hash": request_hash(messages, role),
            "role": role,
            "request": {"messages": messages},
            "response": result.text,
            "error": result.error,
            "model": result.model,
            "tokens_in": result.tokens_in,
            "tokens_out": result.tokens_out,
            "latency_s": result.latency_s,
        }
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return result


class ReplayBackend:
    """Answers from a transcript. Identical requests asked several times get the recorded
    answers in recorded order (the last one repeats if asked more often)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._answers: dict[str, list[ChatResult]] = defaultdict(list)
        self._served: dict[str, int] = defaultdict(int)
        self.model = "replay"
        self._load()

    def _load(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TranscriptError(
                f"cannot read replay transcript {self.path}: {exc.strerror or exc}"
            ) from None
        models: list[str] = []
        lines = text.splitlines()
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
                key = entry["hash"]
                if not isinstance(key, str):
                    raise TypeError("hash is not a string")
                response = entry.get("response")
                if response is not None and not isinstance(response, str):
                    raise TypeError("response is not a string")
                result = ChatResult(
                    text=response,
                    model=str(entry.get("model") or "replay"),
                    tokens_in=int(entry.get("tokens_in") or 0),
                    tokens_out=int(entry.get("tokens_out") or 0),
                    latency_s=0.0,
                    error=entry.get("error"),
                )
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                # A half-written last line from a killed recording is not worth failing on.
                if number == len(lines) and not text.endswith("\n"):
                    break
                raise TranscriptError(
                    f"replay transcript {self.path} line {number} is malformed: {exc}"
                ) from None
            self._answers[key].append(result)
            models.append(result.model)
        if models:
            self.model = models[0]

    def __len__(self) -> int:
        return sum(len(v) for v in self._answers.values())

    def complete(self, messages: list[dict[str, str]], role: str) -> ChatResult:
        key = request_hash(messages, role)
        answers = self._answers.get(key)
        if not answers:
            raise TranscriptMiss(key, role, self.path)
        index = min(self._served[key], len(answers) - 1)
        self._served[key] += 1
        return answers[index]


class RecordingAnalyst(LLMAnalyst):
    """`inner` (an LLM analyst or a chat backend) with every exchange written to `path`.

    Continued conversations need nothing special: each request carries the whole exchange, so
    its hash already names everything that came before it."""

    def __init__(self, inner: LLMAnalyst | ChatBackend, path: str | os.PathLike) -> None:
        if isinstance(inner, LLMAnalyst):
            backend, corrections, limit = inner.backend, inner.max_corrections, inner.results_max_chars
            budget = inner.max_test_requests
        else:
            backend, corrections, limit = inner, 2, prompts.RESULTS_MAX_CHARS
            budget = prompts.DEFAULT_MAX_TEST_REQUESTS
        super().__init__(
            RecordingBackend(backend, path),
            name="record",
            max_corrections=corrections,
            results_max_chars=limit,
            max_test_requests=budget,
        )
        self.path = Path(path)


class ReplayAnalyst(LLMAnalyst):
    """Answers from a recorded transcript with no network. Raises `TranscriptMiss` on a
    request the transcript does not contain. `max_corrections`, `results_max_chars` and
    `max_test_requests` must match the recording run's settings for the requests to match."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        max_corrections: int = 2,
        results_max_chars: int | None = None,
        max_test_requests: int = prompts.DEFAULT_MAX_TEST_REQUESTS,
    ) -> None:
        kwargs = {} if results_max_chars is None else {"results_max_chars": results_max_chars}
        super().__init__(
            ReplayBackend(path), name="replay", max_corrections=max_corrections,
            max_test_requests=max_test_requests, **kwargs
        )
        self.path = Path(path)
