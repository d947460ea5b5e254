"""The parser reads the answers models actually give: prose, several fences, no fences,
missing or odd DECISION lines, truncated output; it never raises."""

import pytest

from refine_core.analyst.parser import (
    decision_word,
    extract_code_blocks,
    parse_decision,
    parse_diagnostics,
    parse_program,
    prose,
    statement_parts,
)

CLS = "RacecarPolicy"
PROGRAM = """import torch
from torch import nn


class RacecarPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = nn.Parameter(torch.tensor([-1.0]))

    def forward(self, tiles, indicators):
        return tiles[:, 0, :3] * self.k, None, {}
"""
TESTS = 'import numpy as np\nprint("mean steer:", float(np.mean(df["act_steer"])))\n'


def fenced(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code.rstrip()}\n```"


def test_program_with_prose_around_it():
    text = f"The structure steers toward the centre.\n\n{fenced(PROGRAM)}\n\nHope this helps."
    out = parse_program(text, CLS)
    assert out.error is None
    assert out.code.strip() == PROGRAM.strip()
    assert "steers toward the centre" in out.reasoning
    assert "class RacecarPolicy" not in out.reasoning


def test_program_picks_the_block_defining_the_class_among_several():
    helper = "def unused():\n    return 1\n"
    text = f"First a helper:\n{fenced(helper)}\nNow the policy:\n{fenced(PROGRAM, 'py')}\n" \
           f"And an example:\n{fenced('policy = RacecarPolicy()', 'python')}"
    out = parse_program(text, CLS)
    assert out.error is None and "class RacecarPolicy" in out.code
    assert "def unused" not in out.code


def test_program_last_definition_wins():
    first = PROGRAM.replace("-1.0", "-2.0")
    text = f"Draft:\n{fenced(first)}\nFinal:\n{fenced(PROGRAM)}"
    assert "-1.0" in parse_program(text, CLS).code


def test_program_without_fences():
    text = "Sure, here is the program:\n\n" + PROGRAM + "\nThis should work well."
    out = parse_program(text, CLS)
    assert out.error is None
    assert "class RacecarPolicy" in out.code
    assert "should work well" not in out.code


def test_program_unclosed_fence_still_parses_when_complete():
    out = parse_program("Here:\n```python\n" + PROGRAM, CLS)
    assert out.error is None and "def forward" in out.code


def test_program_truncated_mid_fence_is_a_syntax_error_with_hint():
    truncated = PROGRAM[: PROGRAM.index("return")] + "return tiles[:, 0"
    out = parse_program("```python\n" + truncated, CLS)
    assert out.code is None
    assert "syntax error" in out.error and "never closed" in out.error


def test_program_wrong_class_name_names_both():
    out = parse_program(fenced(PROGRAM.replace("RacecarPolicy", "CarPolicy")), CLS)
    assert out.code is None
    assert "CarPolicy" in out.error and CLS in out.error


@pytest.mark.parametrize("text", ["", "   \n", "I cannot help with that.", "```\n```"])
def test_program_unusable_answers_give_errors(text):
    out = parse_program(text, CLS)
    assert out.code is None and out.error


def test_diagnostics_joins_several_blocks_and_skips_output_blocks():
    helpers = "def frac(mask):\n    return float(mask.mean())\n"
    text = (f"Helpers:\n{fenced(helpers)}\nExpected output:\n{fenced('mean steer: 0.1', 'text')}"
            f"\nChecks:\n{fenced(TESTS, 'py')}")
    out = parse_diagnostics(text, CLS)
    assert out.error is None
    assert out.code.index("def frac") < out.code.index("mean steer")
    assert "mean steer: 0.1" not in out.code


def test_diagnostics_excludes_a_policy_block():
    text = f"{fenced(PROGRAM)}\n{fenced(TESTS)}"
    out = parse_diagnostics(text, CLS)
    assert "class RacecarPolicy" not in out.code and "print" in out.code


def test_diagnostics_that_print_nothing_are_rejected():
    out = parse_diagnostics(fenced("x = df['act_steer'].mean()\n"), CLS)
    assert out.code is None and "prints nothing" in out.error


def test_diagnostics_skip_a_broken_block_but_keep_good_ones():
    out = parse_diagnostics(fenced("print((\n") + "\n" + fenced(TESTS), CLS)
    assert out.error is None and out.code.strip() == TESTS.strip()


def test_diagnostics_only_broken_code_reports_syntax_error():
    out = parse_diagnostics(fenced("print((\n"), CLS)
    assert out.code is None and "syntax error" in out.error


@pytest.mark.parametrize(
    "line, kind",
    [
        ("DECISION: revise", "program"),
        ("decision: REVISE", "program"),
        ("**DECISION:** more_tests", "tests"),
        ("Decision - more tests", "tests"),
        ("DECISION: `stop`", "stop"),
        ("## Decision: Stop.", "stop"),
        ("DECISION = new program", "program"),
    ],
)
def test_decision_line_variants(line, kind):
    assert decision_word(f"{line}\nbecause reasons") == kind


def test_echoed_template_line_is_ignored():
    text = "You asked for DECISION: revise|more_tests|stop.\nDECISION: stop\nAll good."
    assert decision_word(text) == "stop"
    assert decision_word("DECISION: revise|more_tests|stop") is None


def test_decision_words_inside_code_are_ignored():
    code = PROGRAM.replace("super().__init__()", "super().__init__()\n        # Decision: stop early")
    out = parse_decision(f"DECISION: revise\n{fenced(code)}", CLS)
    assert out.kind == "program"


def test_decision_revise_with_program():
    out = parse_decision(f"DECISION: revise\nThe gain sign is wrong.\n{fenced(PROGRAM)}", CLS)
    assert out.error is None and out.kind == "program" and "class RacecarPolicy" in out.program
    assert out.tests is None and "gain sign" in out.reasoning


def test_decision_more_tests():
    out = parse_decision(f"DECISION: more_tests\n{fenced(TESTS)}", CLS)
    assert (out.kind, out.error) == ("tests", None) and "mean steer" in out.tests


def test_decision_stop_ignores_code():
    out = parse_decision(f"DECISION: stop\nFor reference:\n{fenced(PROGRAM)}", CLS)
    assert out.kind == "stop" and out.program is None and out.error is None


def test_decision_revise_without_program_is_an_error():
    out = parse_decision(f"DECISION: revise\n{fenced(TESTS)}", CLS)
    assert out.kind is None and "revise" in out.error


def test_decision_more_tests_without_code_is_an_error():
    out = parse_decision("DECISION: more_tests\nI would check the steering.", CLS)
    assert out.kind is None and "more_tests" in out.error


def test_missing_decision_inferred_from_program():
    out = parse_decision(f"Here is a better version.\n{fenced(PROGRAM)}", CLS)
    assert out.kind == "program"


def test_missing_decision_inferred_tests_from_other_code():
    out = parse_decision(f"Let me look closer.\n{fenced(TESTS)}", CLS)
    assert out.kind == "tests"


def test_missing_decision_inferred_stop_from_wording():
    out = parse_decision("The policy is fine; I recommend we stop here.", CLS)
    assert out.kind == "stop" and out.error is None


def test_missing_decision_and_nothing_usable():
    out = parse_decision("Interesting results.", CLS)
    assert out.kind is None and "DECISION" in out.error


def test_missing_decision_broken_program_reports_its_error():
    broken = PROGRAM.replace("def forward(self, tiles, indicators):", "def forward(self, tiles")
    out = parse_decision(fenced(broken), CLS)
    assert out.kind is None and "syntax error" in out.error


def test_tilde_fences_and_four_backticks():
    text = f"~~~python\n{TESTS}~~~\n````python\n{PROGRAM}````"
    blocks = extract_code_blocks(text)
    assert [b.closed for b in blocks] == [True, True]
    assert parse_program(text, CLS).error is None


def test_prose_drops_code():
    assert prose(f"before\n{fenced(TESTS)}\nafter") == "before\n\nafter"


def test_the_statement_before_diagnostic_code_is_kept_part_by_part():
    text = ("## 1. Task analysis\nStay on the road at speed.\n\n"
            "## 2. Model summary\nSteer = k * x.\n\n"
            "## 3. Expected nominal behavior\nsteer and x share a sign.\n\n"
            "## 4. Anomalies to look for\nSaturated steering.\n\n"
            "## 5. Hypotheses\nHypothesis 1: k > 0.\nHypothesis 2: little saturation.\n\n"
            + fenced(TESTS))
    out = parse_diagnostics(text, CLS)
    assert out.code.strip() == TESTS.strip()
    parts = statement_parts(out.reasoning)
    assert parts == {
        "task_analysis": "Stay on the road at speed.",
        "model_summary": "Steer = k * x.",
        "expected_behaviour": "steer and x share a sign.",
        "anomalies": "Saturated steering.",
        "hypotheses": "Hypothesis 1: k > 0.\nHypothesis 2: little saturation.",
    }


def test_a_statement_without_code_is_still_a_correction():
    out = parse_diagnostics("Task analysis: drive.\nHypotheses: none yet.", CLS)
    assert out.code is None and "no Python code block" in out.error
    assert statement_parts(out.reasoning)["task_analysis"] == "drive."


def test_unfenced_code_after_a_statement_keeps_the_statement_apart():
    text = "Model summary: a P controller.\nHypotheses: k > 0.\n" + TESTS
    out = parse_diagnostics(text, CLS)
    assert out.code.strip() == TESTS.strip()
    assert out.reasoning == "Model summary: a P controller.\nHypotheses: k > 0."


@pytest.mark.parametrize("text", [None, "", "no headings at all", "Hypotheses:"])
def test_statement_parts_of_odd_text(text):
    assert statement_parts(text) == {}


@pytest.mark.parametrize(
    "text",
    ["\x00\x00", "```python\n" + "(" * 5000, "class RacecarPolicy(" * 200, "DECISION:", "```",
     "DECISION: revise\n```python\nclass RacecarPolicy(:\n```", "\ud800 odd"],
)
def test_never_raises(text):
    outs = [parse_program(text, CLS), parse_diagnostics(text, CLS), parse_decision(text, CLS)]
    for out in outs:
        payload = out.kind if hasattr(out, "kind") else out.code
        assert (out.error is None) == (payload is not None)


@pytest.mark.parametrize("bad", [None, 3, b"bytes"])
def test_non_string_input_is_an_error(bad):
    assert parse_program(bad, CLS).error
    assert parse_decision(bad, CLS).error
