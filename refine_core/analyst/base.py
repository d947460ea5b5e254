"""The analyst interface the loop talks to, and the records every answer carries.

Whoever writes programs and diagnostics (an LLM behind an HTTP endpoint, a replayed
transcript, or the rule-based offline analyst) answers through these three methods, so the
loop never needs to know which one it has. Every answer keeps the `LLMCall` records that
produced it, because the run database stores each call (prompt, response, tokens, latency),
and the `conversation` it belongs to, because the method has the analyst read its own
diagnostic statement next to the results: the next question continues that exchange instead
of starting over.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from refine_core.tasks.spec import TaskSpec

#: Chat messages, oldest first, starting with the system message: {"role", "content"}.
Conversation = list[dict[str, str]]

DecisionKind = Literal["program", "tests", "stop"]
DECISION_KINDS: tuple[str, ...] = ("program", "tests", "stop")


@dataclass
class LLMCall:
    """One request/response exchange, as stored in the `llm_calls` table.

    `prompt` is the request's chat messages as JSON text; `attempt` counts corrective
    attempts within one answer (1 = first ask, 2 = after the first parse error was sent
    back). Transport retries (429, 5xx, timeouts) happen inside one call and are not separate
    records. `error` is set when this exchange produced no usable answer.
    """

    role: str
    model: str
    prompt: str
    response: str
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    error: str | None = None
    attempt: int = 1
    endpoint: str | None = None
    """What the endpoint said about itself (its `system_fingerprint`), e.g. that `refine
    serve-inbox` answered and estimated the token counts."""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ProgramAnswer:
    """A policy program (source text), or `program=None` with `error` saying why not.

    `conversation` is the exchange that produced it, ending with the analyst's answer; pass
    it back as `generate(..., context=...)` if this program fails to build or fit, so the
    repair request sees how the program came about.
    """

    program: str | None
    reasoning: str = ""
    calls: list[LLMCall] = field(default_factory=list)
    error: str | None = None
    conversation: Conversation = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.program is not None and self.error is None


@dataclass
class DiagnosticsAnswer:
    """Diagnostic analysis code to run over the rollout table, or `code=None` with `error`.

    `reasoning` is the statement written before the code: task analysis, model summary,
    expected nominal behaviour, anomalies to look for and hypotheses. The revision request
    continues `conversation`, so the analyst judges the printed results against it.
    """

    code: str | None
    reasoning: str = ""
    calls: list[LLMCall] = field(default_factory=list)
    error: str | None = None
    conversation: Conversation = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.code is not None and self.error is None


@dataclass
class Decision:
    """The three-way answer after reading diagnostic results.

    `kind="program"` carries `program`, `kind="tests"` carries `tests` (more diagnostic
    code for the same table), `kind="stop"` ends refinement. When the analyst could not give
    a usable answer, `kind` is "stop" and `error` is set, so a caller that ignores errors
    still terminates; a careful caller records the error and decides itself.
    After a "tests" answer the caller runs the tests and calls `revise` again with this
    `conversation`; after a "program" answer whose program then fails to fit, it passes this
    `conversation` as the regeneration `context`.
    """

    kind: DecisionKind
    program: str | None = None
    tests: str | None = None
    reasoning: str = ""
    calls: list[LLMCall] = field(default_factory=list)
    error: str | None = None
    conversation: Conversation = field(default_factory=list)
    headline: str = ""
    """The reason for the decision in one line, when the analyst states one apart from its
    prose (the offline analyst does); otherwise it is read from `reasoning`."""

    def __post_init__(self) -> None:
        if self.kind not in DECISION_KINDS:
            raise ValueError(f"Decision.kind must be one of {DECISION_KINDS}, got {self.kind!r}")
        if self.error is None:
            if self.kind == "program" and not self.program:
                raise ValueError("a 'program' decision needs a program")
            if self.kind == "tests" and not self.tests:
                raise ValueError("a 'tests' decision needs test code")

    @property
    def ok(self) -> bool:
        return self.error is None


class AnalystError(RuntimeError):
    """An analyst cannot answer at all (as opposed to giving an unusable answer, which is
    reported in the answer's `error` field)."""


class Analyst(ABC):
    """Writes programs, diagnostics and revisions for one task.

    Implementations never raise for a bad or missing answer from their source: they return
    the answer with `error` set. They raise `AnalystError` (or a subclass) only when they
    cannot work at all, e.g. a replay transcript with no entry for the request.
    """

    #: Short name recorded in the run database and announced in the output.
    name: str = "analyst"
    #: True when answers come from a language model (live or replayed).
    is_llm: bool = False
    #: Whether this analyst's diagnostics read the demonstration when the run does not say
    #: (`RefineConfig.diagnostics_see_demo` None): never for a language model (the published
    #: method gives its analysis code the rollout only); the offline analyst's pre-written
    #: checks compare the rollout with the demonstration, so it has them on.
    reads_demonstration: bool = False

    @abstractmethod
    def generate(
        self,
        spec: TaskSpec,
        *,
        failed_program: str | None = None,
        error: str | None = None,
        context: Conversation | None = None,
    ) -> ProgramAnswer:
        """Write a program from the task spec (zero-shot when nothing else is given).

        With `failed_program` and/or `error` it repairs a program that failed to build or
        fit. With `context` (the conversation of the answer that produced that program) the
        repair continues that exchange, so the analyst sees the program, the error and the
        diagnostic reasoning that led to it; without it the repair starts afresh.
        """

    @abstractmethod
    def diagnose(self, spec: TaskSpec, program: str, schema: list[str], *, demo: bool = False) -> DiagnosticsAnswer:
        """Write diagnostic code for `program` knowing only the rollout table's column names.

        `schema` lists `expert_<action>` columns only when expert relabels are switched on;
        analysts must not assume them otherwise. The code receives the rollout table `df`
        only, unless `demo` is True (the run's `diagnostics_see_demo` option): then also the
        demonstration table `demo`."""

    @abstractmethod
    def revise(
        self,
        spec: TaskSpec,
        program: str,
        results: str,
        *,
        conversation: Conversation | None = None,
        demo: bool = False,
    ) -> Decision:
        """Read printed diagnostic results and answer: a new program, more tests, or stop.

        `conversation` is the exchange the results belong to (the `DiagnosticsAnswer`'s, or
        the previous "tests" `Decision`'s); the question continues it. Without it (the
        diagnostics gave no usable code) the question starts afresh from the task, the
        program and `results`. `demo`: more tests would also receive the demonstration table
        (as in `diagnose`).
        """


@dataclass
class ChatResult:
    """The raw outcome of one chat request (after transport retries): the model's text, or
    `text=None` with `error`. This is the level record/replay works at, so a replayed run
    goes through exactly the same parsing as a live one."""

    text: str | None
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    error: str | None = None
    attempts: int = 1
    endpoint: str | None = None
    """The response's `system_fingerprint`, when the endpoint sent one."""


class ChatBackend(Protocol):
    """Something that answers chat messages: a live endpoint, a recorder around one, or a
    transcript. `role` names the question (generate, regenerate, diagnose, revise)."""

    model: str

    def complete(self, messages: list[dict[str, str]], role: str) -> ChatResult: ...
