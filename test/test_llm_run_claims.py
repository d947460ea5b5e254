"""What the documentation says about the committed language-model runs, against their summaries.

A table row or a sentence about a committed run (`results/llm/<task>/<run>/summary.json`) is a
claim a reader acts on; when it was written by hand it drifted (a README once said every
revised run reached or beat the published figure while one door run ended at 0.1169 against
0.110). So every table row that names a committed run is checked number by number against its
summary, and every sentence of a known kind (medians, "every run ... reached ...") is checked
against the runs it speaks of. For the runs under the published information the transcripts
are read too: no text the loop composed names a simulator or library, a given start program
that does is declared in the table, the table of what each model named on its own matches its
answers, and the door's success radius, which the models used, is in no text we sent. Static
reads only: no run is replayed here.
"""

from __future__ import annotations

import json
import re
import statistics
from functools import cache
from pathlib import Path

import pytest
from published_words import FORBIDDEN

from refine_core.tasks.car_racing import published as car_published
from refine_core.tasks.door_open import published as door_published

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "results" / "llm"
RESULTS = ROOT / "docs" / "RESULTS.md"
TASK_WORDS = {"car": "car_racing", "car_racing": "car_racing", "door": "door_open", "door_open": "door_open"}
PUBLISHED = {"car_racing": car_published, "door_open": door_published}
PUBLISHED_REFINED = {task: float(module.RESULTS[("refined", "il")].split()[0]) for task, module in PUBLISHED.items()}
"""The published refined + IL figures, from the tasks' own record of them."""
HIGHER_IS_BETTER = {"car_racing": True, "door_open": False}
GROUPS = {
    "earlier": lambda s: s["description"] == "legacy_published",
    "published": lambda s: s["description"] == "published",
    "rollout-only published": lambda s: s["description"] == "published" and not s["diagnostics_see_demo"],
}
"""How the documents name a group of runs: by the description variant the runs read and, for
the headline median, whether their analysis code read the rollout table only."""
NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
"""How many runs per task a median sentence says it is over."""
DEMONSTRATION_SEEDS = {"car_racing": 0, "door_open": 500}
"""The demonstration seed of the runs under the published information (outside every evaluation,
selection and diagnostic seed)."""


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), RUNS / "README.md"]


@cache
def summaries() -> dict[tuple[str, str], dict]:
    """(task, run folder name) -> summary, for every committed run."""
    return {(p.parent.parent.name, p.parent.name): json.loads(p.read_text())
            for p in sorted(RUNS.glob("*/*/summary.json"))}


def _round(summary: dict, which: str) -> dict:
    number = summary["first_round" if which == "start" else "best_round"]
    return next(r for r in summary["rounds"] if r["round"] == number)


def _score(summary: dict, which: str) -> float:
    return _round(summary, which)["eval"]["metric_mean"]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def run_rows(text: str) -> list[dict[str, str]]:
    """Every row of a Markdown table with a `task` and a `run` column whose run cell names a
    committed run in backticks, as {header: cell}."""
    rows, header = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = _cells(line)
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        row = dict(zip(header, cells, strict=False))
        name = re.fullmatch(r"`([\w.-]+)`", row.get("run", ""))
        task = TASK_WORDS.get(row.get("task", ""))
        if name and task and (task, name.group(1)) in summaries():
            rows.append({**row, "_key": f"{task}/{name.group(1)}"})
    return rows


def _decimals(number: str) -> int:
    return len(number.split(".")[1]) if "." in number else 0


def check_score(cell: str, summary: dict, which: str) -> list[str]:
    """`cell` is "mean ± std (k/n ...)": the mean and std as rounded, and k/n opened or lapped."""
    problems = []
    found = re.match(r"\**(-?[\d.]+) ± ([\d.]+)\**(?: \((\d+)/(\d+))?", cell)
    if not found:
        return [f"cannot read a score in {cell!r}"]
    mean, std, k, n = found.groups()
    ev = _round(summary, which)["eval"]
    for shown, value in ((mean, ev["metric_mean"]), (std, ev["metric_std"])):
        if round(value, _decimals(shown)) != float(shown):
            problems.append(f"{which}: {shown} but the summary says {value:.6g}")
    if k is not None:
        done = round(ev["success_rate"] * ev["episodes"])
        if (int(k), int(n)) != (done, ev["episodes"]):
            problems.append(f"{which}: {k}/{n} but the summary says {done}/{ev['episodes']}")
    return problems


def check_row(row: dict[str, str]) -> list[str]:
    task, run = row["_key"].split("/")
    summary = summaries()[(task, run)]
    problems = []
    for header, cell in row.items():
        if header.startswith("start + il"):
            problems += check_score(cell, summary, "start")
        elif header.startswith("best refined"):
            problems += check_score(cell, summary, "best")
        elif header == "rounds" and cell and int(cell) != summary["totals"]["rounds"]:
            problems.append(f"rounds {cell}, summary {summary['totals']['rounds']}")
        elif header == "calls" and cell and int(cell) != summary["totals"]["calls"]:
            problems.append(f"calls {cell}, summary {summary['totals']['calls']}")
        elif header == "revisions" and cell and int(cell) != len(summary["revisions"]):
            problems.append(f"revisions {cell}, summary {len(summary['revisions'])}")
        elif header in ("description", "variant") and cell.strip("`*") != summary["description"]:
            problems.append(f"description {cell}, summary {summary['description']}")
        elif header == "best round" and cell and int(cell) != summary["best_round"]:
            problems.append(f"best round {cell}, summary {summary['best_round']}")
        elif header.startswith("tokens"):
            problems += check_tokens(cell, summary)
        elif header == "analysis code read":
            problems += check_demo_access(cell, summary)
        elif header == "start":
            problems += check_start(cell, summary)
    return [f"{row['_key']}: {p}" for p in problems]


def check_tokens(cell: str, summary: dict) -> list[str]:
    """`cell` is "in k / out k", each rounded to 0.1k as shown."""
    found = re.fullmatch(r"([\d.]+)k / ([\d.]+)k", cell)
    if not found:
        return [f"cannot read tokens in {cell!r}"]
    problems = []
    for shown, key in zip(found.groups(), ("tokens_in", "tokens_out"), strict=True):
        value = summary["totals"][key] / 1000
        if round(value, _decimals(shown)) != float(shown):
            problems.append(f"{key} {shown}k but the summary says {value:.3f}k")
    return problems


def check_demo_access(cell: str, summary: dict) -> list[str]:
    """`cell` says whether the analysis code read the rollout only or the demonstration too."""
    said = {"rollout only": False, "rollout + demonstration": True}.get(cell.strip("*"))
    if said is None:
        return [f"cannot read the demonstration access in {cell!r}"]
    if said != summary["diagnostics_see_demo"]:
        return [f"analysis code read {cell!r}, summary diagnostics_see_demo={summary['diagnostics_see_demo']}"]
    return []


def start_program(summary: dict) -> str:
    """The source of the program the run started from (the given one, or its zero-shot)."""
    first = next(r for r in summary["rounds"] if r["round"] == summary["first_round"])
    return summary["programs"][first["program_sha256"]]


def check_start(cell: str, summary: dict) -> list[str]:
    """A start cell says "its zero-shot" or names the given program; for a run under the
    published information it must also say when that given program names the simulator (the
    model then read the name through it)."""
    zero_shot = summary["start"]["kind"] == "zero-shot"
    if ("zero-shot" in cell) != zero_shot:
        return [f"start {cell!r}, summary start {summary['start']}"]
    if zero_shot or summary["description"] != "published":
        return []
    names = bool(FORBIDDEN.search(start_program(summary)))
    if names != ("names the simulator" in cell):
        return [f"start {cell!r}: the given program {'names' if names else 'does not name'} the simulator"]
    return []


def group(name: str) -> dict[tuple[str, str], dict]:
    member = GROUPS[name]
    return {k: s for k, s in summaries().items() if member(s)}


def _beats_published(task: str, value: float) -> bool:
    published = PUBLISHED_REFINED[task]
    return value >= published if HIGHER_IS_BETTER[task] else value <= published


def check_sentences(text: str) -> list[str]:
    """The kinds of sentences the documents make about the runs, each checked."""
    problems = []
    flat = " ".join(text.split())
    for found in re.finditer(r"[Mm]edians? over the (\w+) (earlier|rollout-only published|published) runs[^:]*: "
                             r"car (\d+(?:\.\d+)?)[^,;]*, door (\d+(?:\.\d+)?)", flat):
        runs = group(found.group(2))
        for task, shown in (("car_racing", found.group(3)), ("door_open", found.group(4))):
            scores = [_score(s, "best") for (t, _), s in runs.items() if t == task]
            count = NUMBER_WORDS.get(found.group(1))
            if count is not None and count != len(scores):
                problems.append(f"{found.group(0)[:80]}...: {len(scores)} {task} runs in that group, not {count}")
            value = statistics.median(scores) if scores else float("nan")
            if round(value, _decimals(shown)) != float(shown):
                problems.append(f"{found.group(0)[:80]}...: {task} median of the best rounds is {value:.6g}")
    for found in re.finditer(r"[Ee]very (car |door )?run (?:that )?[^.]*?(?:reached or beat|at or beyond|reached the "
                             r"published)[^.]*\.", flat):
        tasks = [TASK_WORDS[found.group(1).strip()]] if found.group(1) else list(PUBLISHED_REFINED)
        for (task, run), s in summaries().items():
            if task in tasks and s["revisions"] and not _beats_published(task, _score(s, "best")):
                problems.append(f"{found.group(0)[:80]}...: {task}/{run} revised and ended at "
                                f"{_score(s, 'best'):.4g} against the published {PUBLISHED_REFINED[task]}")
    if re.search(r"door: final handle-to-target distance", flat):
        problems.append("the door's metric is the smallest handle-to-target distance over the episode, not the final one")
    return problems


def test_every_committed_run_is_labelled_with_what_it_read_and_what_its_code_read():
    assert summaries(), "no committed runs under results/llm/"
    for (task, run), s in summaries().items():
        assert s["description"] in ("legacy_published", "published", "detailed"), f"{task}/{run}"
        assert isinstance(s.get("diagnostics_see_demo"), bool), f"{task}/{run} does not say what its code read"
        assert (s.get("evaluation") or {}).get("action_mode") in ("mean", "sample"), f"{task}/{run}"
        assert (s.get("demonstration") or {}).get("seed") is not None, f"{task}/{run}"


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_what_the_documents_say_about_the_committed_runs_is_what_their_summaries_say(path):
    text = path.read_text(encoding="utf-8")
    problems = [p for row in run_rows(text) for p in check_row(row)] + check_sentences(text)
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_the_run_tables_are_found_and_the_checks_can_fail():
    """The tables of the earlier runs are read (a check that reads nothing proves nothing), and
    a wrong number, a false 'every run' sentence, a wrong median and the word 'final' for the
    door's metric are each caught."""
    text = (ROOT / "docs" / "RESULTS.md").read_text(encoding="utf-8")
    rows = run_rows(text)
    assert {r["_key"] for r in rows} >= {f"{t}/{r}" for t, r in group("earlier")}, "every earlier run has a row"
    row = next(r for r in rows if r["_key"] == "door_open/start-user-reach-only")
    best = next(k for k in row if k.startswith("best refined"))
    assert check_row(row) == []
    assert check_row({**row, best: row[best].replace("0.1169", "0.1069")})
    assert check_row({**row, "calls": "5"})
    assert check_sentences("Every run that started below the published refined figure and revised its program "
                           "ended at or beyond it.")
    assert check_sentences("Medians over the five earlier runs: car 909.2 (published 882.0), door 0.0700.")
    assert not check_sentences("Medians over the five earlier runs: car 909.2 (published 882.0), door 0.0685.")
    assert check_sentences("Car: return; door: final handle-to-target distance in metres.")


@cache
def transcript(task: str, run: str) -> list[dict]:
    """A committed run's transcript: its settings line, then one line per call."""
    lines = (RUNS / task / run / "transcript.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _names(text: str) -> set[str]:
    """The simulator and library names in `text`, spelled one way ("car racing" = "carracing")."""
    return {re.sub(r"[\s-]", "", m.group(0).lower()) for m in FORBIDDEN.finditer(text)}


FENCED = re.compile(r"^```.*?^```", re.M | re.S)
"""A fenced block of a request: a program (the given start, or one the model wrote) or the
printed output of the model's own analysis code. Everything else the loop composed."""


def composed_lines(calls: list[dict]) -> list[tuple[str, str]]:
    """(where, line) for every line the loop composed in the requests of `calls`: system
    prompts whole, user messages outside their fenced blocks; the model's own earlier answers
    (assistant messages) are not ours."""
    return [(f"call {i} ({call['role']}), {message['role']}", line)
            for i, call in enumerate(calls)
            for message in call["request"]["messages"] if message["role"] != "assistant"
            for line in (message["content"] if message["role"] == "system"
                         else FENCED.sub("", message["content"])).splitlines()]


def what_we_sent_names(calls: list[dict]) -> list[str]:
    """Every composed line that names a simulator or library (there must be none)."""
    return [f"{where}: {line.strip()[:120]}" for where, line in composed_lines(calls) if FORBIDDEN.search(line)]


def check_names_row(row: dict[str, str]) -> list[str]:
    """A row of the table of what each model read and named: whether its given start program
    names the simulator ("yes", "no", or "(its zero-shot)"), and the simulator or library
    names its own answers contain, as a list of `Name`s or "none"."""
    task, run = row["_key"].split("/")
    summary = summaries()[(task, run)]
    problems = []
    start = row.get("given start names the simulator", "")
    if summary["start"]["kind"] == "zero-shot":
        expected = "(its zero-shot)"
    else:
        expected = "yes" if FORBIDDEN.search(start_program(summary)) else "no"
    if start != expected:
        problems.append(f"given start names the simulator: {start!r}, the program says {expected!r}")
    cell = row.get("its answers named", "")
    said = set() if cell == "none" else {n for found in re.findall(r"`([^`]+)`", cell) for n in _names(found)}
    found = set().union(*(_names(call.get("response") or "") for call in transcript(task, run)[1:]))
    if said != found:
        problems.append(f"its answers named {sorted(found) or 'none'}, the table says {cell!r}")
    return [f"{row['_key']}: {p}" for p in problems]


SUCCESS_RADIUS = re.compile(r"(?<![\d.])0\.08(?!\d)|\b8 ?cm\b")
"""The door's success radius (handle within 0.08 m of the target in x), which the published
description does not give."""


def test_the_headline_table_lists_every_run_under_the_published_information_with_every_column():
    rows = {r["_key"]: r for r in run_rows(RESULTS.read_text(encoding="utf-8")) if "best round" in r}
    published = group("published")
    assert published, "no committed run under the published information"
    for task, run in published:
        row = rows.get(f"{task}/{run}")
        assert row is not None, f"{task}/{run} has no row in docs/RESULTS.md"
        for column in ("start", "best round", "rounds", "calls", "revisions", "description", "analysis code read"):
            assert row.get(column), f"{task}/{run}: no {column!r} column"
        assert any(k.startswith("start + il") for k in row) and any(k.startswith("best refined") for k in row)
        assert any(k.startswith("tokens") for k in row), f"{task}/{run}: no tokens column"


def test_the_runs_under_the_published_information_used_the_verified_protocol():
    """Each run under the published information was evaluated as the authors verified the
    task's figures, on the demonstration seed outside every evaluation set, with the published
    budget (one diagnostic episode a round, up to six rounds)."""
    for (task, run), s in group("published").items():
        verified = PUBLISHED[task].VERIFIED_EVALUATION
        assert s["evaluation"]["action_mode"] == verified["mode"] == s["evaluation"]["verified_mode"], f"{task}/{run}"
        assert s["evaluation"]["seeds"] == list(verified["seeds"]) == s["evaluation"]["verified_seeds"], f"{task}/{run}"
        assert s["demonstration"]["seed"] == DEMONSTRATION_SEEDS[task], f"{task}/{run}"
        assert s["demonstration"]["seed"] not in verified["seeds"], f"{task}/{run}"
        assert s["settings"]["diagnostic_episodes"] == 1 and s["settings"]["max_rounds"] == 6, f"{task}/{run}"
        assert s["status"] == "finished", f"{task}/{run}"
        assert s["analyst"]["language_model"] and (RUNS / task / run / "MODEL.txt").read_text().strip(), f"{task}/{run}"
        assert transcript(task, run)[0]["settings"]["diagnostics_see_demo"] == s["diagnostics_see_demo"], f"{task}/{run}"


@pytest.mark.parametrize("key", sorted(f"{t}/{r}" for t, r in group("published")))
def test_what_we_sent_under_the_published_variant_names_no_simulator_or_library(key):
    """In a published-variant run the model read no simulator, robot-model or library name in
    any text the loop composed; the only other sources are a given start program (the table
    says when) and the model's own earlier answers (the names-table lists them)."""
    task, run = key.split("/")
    assert what_we_sent_names(transcript(task, run)[1:]) == []


def test_the_table_of_what_each_model_named_is_what_its_answers_contain():
    rows = [r for r in run_rows(RESULTS.read_text(encoding="utf-8")) if "its answers named" in r]
    assert {r["_key"] for r in rows} == {f"{t}/{r}" for t, r in group("published")}, "one row per published run"
    assert [p for row in rows for p in check_names_row(row)] == []


def test_the_door_success_radius_came_from_the_models_not_from_what_we_sent():
    """The door instances worked with a 0.08 m success radius. No text the loop composed under
    the published variant holds it (the description and prompt, every system prompt, every
    request outside its fenced program and printout blocks), nor does any given start program;
    each instance wrote it in its own first analysis code, before any printout reached it."""
    from refine_core.analyst import prompts
    from refine_core.tasks import get_task

    spec = get_task("door_open", "published").spec.for_analyst()
    assert not any(SUCCESS_RADIUS.search(m["content"]) for m in prompts.generation_messages(spec))
    runs = [r for t, r in group("published") if t == "door_open"]
    assert runs
    for run in runs:
        calls = transcript("door_open", run)[1:]
        assert not [line for _, line in composed_lines(calls) if SUCCESS_RADIUS.search(line)], run
        assert not SUCCESS_RADIUS.search(start_program(summaries()[("door_open", run)])), run
        first_analysis = next(c for c in calls if c["role"] == "diagnose")
        assert SUCCESS_RADIUS.search(first_analysis["response"]), run
        before = calls[:calls.index(first_analysis) + 1]
        assert "printed results" not in " ".join(m["content"] for c in before for m in c["request"]["messages"]).lower(), run


def test_the_new_checks_can_fail():
    """A wrong best round, token count, demonstration access, an undisclosed simulator name in a
    given start, a wrong names-table cell and a median over the wrong number of runs are caught,
    and a line we composed naming the simulator would be found."""
    rows = {r["_key"]: r for r in run_rows(RESULTS.read_text(encoding="utf-8")) if "best round" in r}
    row = rows["car_racing/published-start-writer2"]
    assert check_row(row) == []
    assert check_row({**row, "best round": "5"})
    tokens = next(k for k in row if k.startswith("tokens"))
    assert check_row({**row, tokens: "132.1k / 81.0k"})
    assert check_row({**row, "analysis code read": "rollout + demonstration"})
    assert check_row({**row, "start": "`writer2`"}), "the given start names the simulator and the cell must say so"
    door = rows["door_open/published-start-reach-only"]
    assert check_row({**door, "start": "a user's controller (names the simulator)"})
    names = {r["_key"]: r for r in run_rows(RESULTS.read_text(encoding="utf-8")) if "its answers named" in r}
    assert check_names_row({**names["door_open/published-start-reach-only"], "its answers named": "none"})
    assert check_names_row({**names["door_open/published-zero-shot-1"], "its answers named": "`MuJoCo`"})
    assert check_sentences("Medians over the two rollout-only published runs by their best round: car 874.1, "
                           "door 0.02238.")
    assert not check_sentences("Medians over the three rollout-only published runs by their best round: car 874.1, "
                               "door 0.02238.")
    assert check_sentences("Medians over the three rollout-only published runs by their best round: car 926.2, "
                           "door 0.02238.")
    calls = transcript("car_racing", "published-zero-shot-1")[1:]
    leaked = [{**c, "request": {"messages": [*c["request"]["messages"], {"role": "user", "content": "Gymnasium tracks."}]}}
              for c in calls]
    assert any("closed race track" in line for _, line in composed_lines(calls[:1])), "the description is read"
    assert what_we_sent_names(leaked)
    fenced = [{**c, "request": {"messages": [*c["request"]["messages"],
                                             {"role": "user", "content": "Printed:\n```text\nGymnasium\n```"}]}}
              for c in calls]
    assert not what_we_sent_names(fenced), "a printout of the model's own code is not text we composed"
    assert check_names_row({**names["car_racing/published-start-writer3"], "given start names the simulator": "no"})
