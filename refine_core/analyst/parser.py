"""Turning free-form model answers into programs, diagnostic code and decisions.

Models wrap code in prose, split it over several fences, forget the DECISION line, use
`py` fences or none at all, and sometimes stop mid-fence. These functions accept all of
that and return a parse result whose `error` explains what is missing (the text is sent
back to the model as a correction). They are pure and never raise on any input string.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

# Fence languages that mean "this is Python" (empty means unlabelled).
_PYTHON_LANGS = {"", "python", "py", "python3", "py3", "ipython", "pycon"}
_FENCE_OPEN = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([A-Za-z0-9_+.-]*)[^\n]*$", re.MULTILINE)
_DECISION_LINE = re.compile(
    r"^[ \t>*#_`-]*decision[ \t*_`]*[:=\-][ \t*_`\"']*([A-Za-z_ -]+)",
    re.IGNORECASE | re.MULTILINE,
)
_DECISION_WORDS = {
    "revise": "program",
    "revision": "program",
    "revised": "program",
    "program": "program",
    "new program": "program",
    "new_program": "program",
    "more_tests": "tests",
    "more tests": "tests",
    "more-tests": "tests",
    "more_test": "tests",
    "more test": "tests",
    "tests": "tests",
    "test": "tests",
    "stop": "stop",
    "done": "stop",
    "finish": "stop",
    "finished": "stop",
}
_STOP_WORDING = re.compile(
    r"\b(stop|no further (changes|revisions?|tests)|no (more|other) (changes|revisions?|tests)"
    r"|nothing (more|else) to (change|fix|test)|converged)\b",
    re.IGNORECASE,
)
_CODE_START = re.compile(r"^(import |from \S+ import |class |def |@|print\(|df\b|demo\b)")
# Bound the work on pathological unfenced answers.
_MAX_TRIM_LINES = 60


@dataclass(frozen=True)
class CodeBlock:
    lang: str
    code: str
    closed: bool = True

    @property
    def is_python(self) -> bool:
        return self.lang.lower() in _PYTHON_LANGS


@dataclass(frozen=True)
class ParsedCode:
    """Program source or diagnostic code, or `code=None` with `error`."""

    code: str | None
    reasoning: str
    error: str | None = None


@dataclass(frozen=True)
class ParsedDecision:
    kind: str | None
    program: str | None
    tests: str | None
    reasoning: str
    error: str | None = None


def extract_code_blocks(text: str) -> list[CodeBlock]:
    """Fenced blocks in order; an opening fence never closed runs to the end of the text."""
    blocks: list[CodeBlock] = []
    pos = 0
    while True:
        match = _FENCE_OPEN.search(text, pos)
        if match is None:
            break
        fence, lang = match.group(1), match.group(2)
        body_start = match.end() + 1
        close = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$",
                           re.MULTILINE)
        end_match = close.search(text, body_start)
        if end_match is None:
            body = re.sub(r"(```+|~~~+)\s*$", "", text[body_start:].rstrip())
            blocks.append(CodeBlock(lang, body.rstrip() + "\n", closed=False))
            break
        blocks.append(CodeBlock(lang, text[body_start:end_match.start()].rstrip() + "\n"))
        pos = end_match.end()
    return [b for b in blocks if b.code.strip()]


def prose(text: str) -> str:
    """The text outside code fences, as the answer's reasoning."""
    out: list[str] = []
    pos = 0
    while True:
        match = _FENCE_OPEN.search(text, pos)
        if match is None:
            out.append(text[pos:])
            break
        out.append(text[pos:match.start()])
        fence = match.group(1)
        close = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$",
                           re.MULTILINE)
        end_match = close.search(text, match.end() + 1)
        if end_match is None:
            break
        pos = end_match.end()
    return re.sub(r"\n{3,}", "\n\n", "".join(out)).strip()


def _syntax_error(code: str) -> str | None:
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, deep nesting
        return str(exc) or type(exc).__name__
    return None


def _unfenced_code(text: str) -> str | None:
    """Code written without fences: from the first code-looking line, trimmed at the end
    until it parses (prose after the code is common)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return None
    body = lines[start:]
    for cut in range(min(len(body), _MAX_TRIM_LINES + 1)):
        candidate = "\n".join(body[: len(body) - cut] if cut else body).strip()
        if candidate and _syntax_error(candidate) is None:
            return candidate + "\n"
    return None


def _reasoning(text: str) -> str:
    """The answer's prose. For an unfenced answer that is the text before the code starts, so
    a statement written ahead of unfenced code is kept and the code is not repeated in it."""
    if _FENCE_OPEN.search(text):
        return prose(text)
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None or _unfenced_code(text) is None:
        return prose(text)
    return "\n".join(lines[:start]).strip()


_PART_HEADING = re.compile(
    r"^[ \t>#*_-]*(?:\d+[.)][ \t]*)?[*_]*(task analysis|model summary|expected nominal behaviou?r"
    r"|anomalies to look for|hypothes[ie]s)\b[*_]*[ \t]*[:.\-]?[*_]*[ \t]*",
    re.IGNORECASE | re.MULTILINE,
)
_PART_NAMES = {
    "task analysis": "task_analysis",
    "model summary": "model_summary",
    "expected nominal behaviour": "expected_behaviour",
    "expected nominal behavior": "expected_behaviour",
    "anomalies to look for": "anomalies",
    "hypotheses": "hypotheses",
    "hypothesis": "hypotheses",
}


def statement_parts(reasoning: str) -> dict[str, str]:
    """The five parts of the statement written before diagnostic code (task_analysis,
    model_summary, expected_behaviour, anomalies, hypotheses), each as written; parts the
    answer does not head are absent. Tolerates numbering, markdown emphasis and heading marks."""
    if not isinstance(reasoning, str):
        return {}
    # A heading repeated right after itself ("Hypotheses:" then "Hypothesis 1: ...") is
    # part of the same section, not a new one.
    found: list[tuple[str, re.Match[str]]] = []
    for match in _PART_HEADING.finditer(reasoning):
        key = _PART_NAMES.get(re.sub(r"\s+", " ", match.group(1).lower()), "")
        if not found or found[-1][0] != key:
            found.append((key, match))
    parts: dict[str, str] = {}
    for i, (key, match) in enumerate(found):
        end = found[i + 1][1].start() if i + 1 < len(found) else len(reasoning)
        body = reasoning[match.end():end].strip()
        if key and key not in parts and body:
            parts[key] = body
    return parts


def _python_blocks(text: str) -> list[CodeBlock]:
    blocks = [b for b in extract_code_blocks(text) if b.is_python]
    if not blocks and not _FENCE_OPEN.search(text):
        code = _unfenced_code(text)
        if code is not None:
            blocks = [CodeBlock("", code)]
    return blocks


def _defined_classes(code: str) -> list[str]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # Tolerate a syntax error elsewhere: spot the class statement textually.
        return re.findall(r"^class\s+([A-Za-z_]\w*)", code, re.MULTILINE)
    return [n.name for n in tree.body if isinstance(n, ast.ClassDef)]


def _defines(code: str, class_name: str) -> bool:
    return class_name in _defined_classes(code)


def parse_program(text: str, class_name: str) -> ParsedCode:
    """The program: the (last) Python block defining `class_name`."""
    if not isinstance(text, str) or not text.strip():
        return ParsedCode(None, "", "the answer is empty")
    reasoning = _reasoning(text)
    blocks = _python_blocks(text)
    candidates = [b for b in blocks if _defines(b.code, class_name)]
    if not candidates:
        found = sorted({c for b in blocks for c in _defined_classes(b.code)})
        if found:
            return ParsedCode(None, reasoning,
                              f"no code block defines class {class_name!r} (found classes: "
                              f"{', '.join(found)}); the policy class must be named {class_name}")
        if blocks:
            return ParsedCode(None, reasoning,
                              f"the code does not define the policy class {class_name!r}")
        return ParsedCode(None, reasoning,
                          "the answer contains no Python code block (expected one ```python "
                          f"block defining class {class_name})")
    block = candidates[-1]
    problem = _syntax_error(block.code)
    if problem is not None:
        tail = "" if block.closed else " (the code fence was never closed: answer truncated?)"
        return ParsedCode(None, reasoning, f"the program has a syntax error at {problem}{tail}")
    return ParsedCode(block.code, reasoning)


def parse_diagnostics(text: str, class_name: str | None = None) -> ParsedCode:
    """Diagnostic code: every parsable Python block not defining the policy class, joined
    in order (models often split helpers and checks over several blocks). The reasoning is
    the statement around the code (see `statement_parts`); an answer with a statement but no
    code is unusable, so the model is asked again."""
    if not isinstance(text, str) or not text.strip():
        return ParsedCode(None, "", "the answer is empty")
    reasoning = _reasoning(text)
    blocks = _python_blocks(text)
    if class_name:
        blocks = [b for b in blocks if not _defines(b.code, class_name)]
    good = [b.code for b in blocks if _syntax_error(b.code) is None]
    if not good:
        if blocks:
            problem = _syntax_error(blocks[-1].code)
            return ParsedCode(None, reasoning, f"the diagnostic code has a syntax error at {problem}")
        return ParsedCode(None, reasoning,
                          "the answer contains no Python code block with diagnostic code")
    code = "\n\n".join(c.rstrip() for c in good) + "\n"
    if "print" not in code:
        return ParsedCode(None, reasoning,
                          "the diagnostic code prints nothing; results are read from printed output")
    return ParsedCode(code, reasoning)


def decision_word(text: str) -> str | None:
    """The kind named on the last DECISION line ("program", "tests", "stop"), ignoring echoed
    templates such as `DECISION: revise|more_tests|stop` and lines inside code fences."""
    found: str | None = None
    text = prose(text)
    for match in _DECISION_LINE.finditer(text):
        line_end = text.find("\n", match.start())
        line = text[match.start(): line_end if line_end >= 0 else len(text)]
        if "|" in line or "/" in line:
            continue
        word = re.sub(r"\s+", " ", match.group(1).strip(" -_").lower())
        kind = _DECISION_WORDS.get(word) or _DECISION_WORDS.get(word.split(" ")[0])
        if kind is None and word.startswith("more"):
            kind = "tests"
        if kind is not None:
            found = kind
    return found


def parse_decision(text: str, class_name: str) -> ParsedDecision:
    """The three-way answer. Without a DECISION line: a block defining the policy class
    means a revision, other code means more tests, 'stop' wording means stop."""
    if not isinstance(text, str) or not text.strip():
        return ParsedDecision(None, None, None, "", "the answer is empty")
    reasoning = prose(text)
    kind = decision_word(text)
    if kind == "stop":
        return ParsedDecision("stop", None, None, reasoning)
    if kind == "program":
        program = parse_program(text, class_name)
        if program.code is None:
            return ParsedDecision(None, None, None, reasoning,
                                  f"DECISION is revise but {program.error}")
        return ParsedDecision("program", program.code, None, reasoning)
    if kind == "tests":
        tests = parse_diagnostics(text, class_name)
        if tests.code is None:
            return ParsedDecision(None, None, None, reasoning,
                                  f"DECISION is more_tests but {tests.error}")
        return ParsedDecision("tests", None, tests.code, reasoning)

    program = parse_program(text, class_name)
    if program.code is not None:
        return ParsedDecision("program", program.code, None, reasoning)
    blocks = _python_blocks(text)
    if any(_defines(b.code, class_name) for b in blocks):
        return ParsedDecision(None, None, None, reasoning, program.error)
    tests = parse_diagnostics(text, class_name)
    if tests.code is not None:
        return ParsedDecision("tests", None, tests.code, reasoning)
    if _STOP_WORDING.search(text):
        return ParsedDecision("stop", None, None, reasoning)
    return ParsedDecision(None, None, None, reasoning,
                          "no DECISION line and no usable code; start the answer with "
                          "'DECISION: revise', 'DECISION: more_tests' or 'DECISION: stop'")
