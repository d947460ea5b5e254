"""Record and replay LLM answers, so a run can be reproduced without a network.

A transcript is JSONL, one line per chat request: `{hash, role, request, response, model,
...}`, optionally preceded by one `{"kind": "run", "settings": {...}}` line that says how the
recorded run was set up (task, description variant, start program, budgets), so that a
replay can set itself up the same way. The hash covers the role and the request messages
(canonical JSON), not the model or endpoint, so a transcript recorded against one server
replays anywhere. Recording happens at the chat level (messages in, raw text out), so a
replayed answer is parsed by the same code as the live one and yields the same programs and
decisions.

Two replay modes:
- exact (the default): each request is answered by the recorded answer to the identical
  request (same hash); any other request is a `TranscriptMiss`. Reproduces the recorded run
  bit for bit, scores included, when everything else is the same.
- sequential: the requests of each role (generate, regenerate, diagnose, revise) get the
  recorded answers of that role in recorded order, whatever their text, and every request
  whose hash differs from the recorded one is kept as a `Divergence`. Used where the run
  cannot be identical, e.g. with shorter episodes (different diagnostic printouts, so
  different revision requests): the recorded programs and decisions are reproduced, and
  the divergences say exactly where the requests differed.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from refine_core.analyst import prompts
from refine_core.analyst.base import AnalystError, ChatBackend, ChatResult
from refine_core.analyst.openai_analyst import LLMAnalyst

TRANSCRIPT_VERSION = 2
"""1: call lines only. 2: an optional first `run` line with the run's settings; call lines
may carry the endpoint's `endpoint` fingerprint."""
REPLAY_MODES: tuple[str, ...] = ("exact", "sequential")


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


@dataclass(frozen=True)
class Divergence:
    """A request a sequential replay answered although it differs from the recorded one."""

    role: str
    index: int
    """Position among the requests of this role (0 = the first)."""
    recorded_hash: str
    request_hash: str

    def to_dict(self) -> dict:
        return asdict(self)


def read_settings(path: str | os.PathLike) -> dict | None:
    """The recorded run's settings (the transcript's `run` line), or None when it has none."""
    try:
        with Path(path).open(encoding="utf-8") as fh:
            first = fh.readline()
    except OSError:
        return None
    try:
        entry = json.loads(first)
    except json.JSONDecodeError:
        return None
    if isinstance(entry, dict) and entry.get("kind") == "run" and isinstance(entry.get("settings"), dict):
        return entry["settings"]
    return None


def start_transcript(path: str | os.PathLike, settings: dict, *, resume: bool = False) -> None:
    """Open a transcript for a new recording with its `run` line. A file that already holds
    a recording is refused unless the run resumes (then it is appended to as it is)."""
    path = Path(path)
    if path.exists() and path.stat().st_size > 0:
        if resume:
            return
        raise TranscriptError(f"transcript {path} already holds a recording; give a new file (or --resume the run)")
    path.parent.mkdir(parents=True, exist_ok=True)
    line = {"v": TRANSCRIPT_VERSION, "kind": "run", "settings": settings}
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


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
            "endpoint": result.endpoint,
        }
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return result


class ReplayBackend:
    """Answers from a transcript, in one of `REPLAY_MODES` (see the module's docstring). In
    exact mode identical requests asked several times get the recorded answers in recorded
    order (the last one repeats if asked more often)."""

    def __init__(self, path: str | os.PathLike, mode: str = "exact") -> None:
        if mode not in REPLAY_MODES:
            raise ValueError(f"replay mode must be one of {REPLAY_MODES}, got {mode!r}")
        self.path = Path(path)
        self.mode = mode
        self._answers: dict[str, list[ChatResult]] = defaultdict(list)
        self._served: dict[str, int] = defaultdict(int)
        self._by_role: dict[str, list[tuple[str, ChatResult]]] = defaultdict(list)
        self._next_of_role: dict[str, int] = defaultdict(int)
        self.divergences: list[Divergence] = []
        """Sequential mode: every request answered although it differed from the recording."""
        self.requests = 0
        self.settings: dict | None = None
        """The recorded run's settings (the transcript's `run` line), if it has one."""
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
                if isinstance(entry, dict) and entry.get("kind") == "run":
                    self.settings = entry.get("settings") if isinstance(entry.get("settings"), dict) else None
                    continue
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
                    endpoint=entry.get("endpoint"),
                )
                role = str(entry.get("role") or "")
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                # A half-written last line from a killed recording is not worth failing on.
                if number == len(lines) and not text.endswith("\n"):
                    break
                raise TranscriptError(
                    f"replay transcript {self.path} line {number} is malformed: {exc}"
                ) from None
            self._answers[key].append(result)
            self._by_role[role].append((key, result))
            models.append(result.model)
        if models:
            self.model = models[0]

    def __len__(self) -> int:
        return sum(len(v) for v in self._answers.values())

    @property
    def unused(self) -> dict[str, int]:
        """Sequential mode: recorded answers per role that no request asked for (yet)."""
        return {role: len(entries) - self._next_of_role[role] for role, entries in self._by_role.items()
                if len(entries) > self._next_of_role[role]}

    def complete(self, messages: list[dict[str, str]], role: str) -> ChatResult:
        key = request_hash(messages, role)
        self.requests += 1
        if self.mode == "sequential":
            return self._next_in_order(key, role)
        answers = self._answers.get(key)
        if not answers:
            raise TranscriptMiss(key, role, self.path)
        index = min(self._served[key], len(answers) - 1)
        self._served[key] += 1
        return answers[index]

    def _next_in_order(self, key: str, role: str) -> ChatResult:
        index = self._next_of_role[role]
        entries = self._by_role.get(role, [])
        if index >= len(entries):
            raise TranscriptError(
                f"replay transcript {self.path} holds {len(entries)} {role!r} answer(s) and the run asked for "
                f"one more: the replayed run took another path than the recorded one")
        self._next_of_role[role] = index + 1
        recorded, result = entries[index]
        if recorded != key:
            self.divergences.append(Divergence(role, index, recorded, key))
        return result


class RecordingAnalyst(LLMAnalyst):
    """`inner` (an LLM analyst or a chat backend) with every exchange written to `path`.

    Continued conversations need nothing special: each request carries the whole exchange, so
    its hash already names everything that came before it."""

    def __init__(self, inner: LLMAnalyst | ChatBackend, path: str | os.PathLike, *, name: str = "record") -> None:
        if isinstance(inner, LLMAnalyst):
            backend, corrections, limit = inner.backend, inner.max_corrections, inner.results_max_chars
            budget = inner.max_test_requests
        else:
            backend, corrections, limit = inner, 2, prompts.RESULTS_MAX_CHARS
            budget = prompts.DEFAULT_MAX_TEST_REQUESTS
        super().__init__(
            RecordingBackend(backend, path),
            name=name,
            max_corrections=corrections,
            results_max_chars=limit,
            max_test_requests=budget,
        )
        self.path = Path(path)


class ReplayAnalyst(LLMAnalyst):
    """Answers from a recorded transcript with no network. In exact mode a request the
    transcript does not contain raises `TranscriptMiss`; `max_corrections`,
    `results_max_chars` and `max_test_requests` must match the recording run's settings for
    the requests to match. Sequential mode answers by role in recorded order and keeps the
    divergences (`backend.divergences`)."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        max_corrections: int = 2,
        results_max_chars: int | None = None,
        max_test_requests: int = prompts.DEFAULT_MAX_TEST_REQUESTS,
        mode: str = "exact",
    ) -> None:
        kwargs = {} if results_max_chars is None else {"results_max_chars": results_max_chars}
        self.replay = ReplayBackend(path, mode)
        super().__init__(
            self.replay, name="replay", max_corrections=max_corrections,
            max_test_requests=max_test_requests, **kwargs
        )
        self.path = Path(path)

    def replay_report(self) -> dict:
        """How the replay went, for the run's records and summary."""
        return {"mode": self.replay.mode, "transcript": str(self.path), "model": self.replay.model,
                "requests": self.replay.requests,
                "divergences": [d.to_dict() for d in self.replay.divergences],
                "unused_answers": self.replay.unused if self.replay.mode == "sequential" else {}}
