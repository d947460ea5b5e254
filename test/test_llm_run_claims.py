"""What the documentation says about the committed language-model runs, against their summaries.

A table row or a sentence about a committed run (`results/llm/<task>/<run>/summary.json`) is a
claim a reader acts on; when it was written by hand it drifted (a README once said every
revised run reached or beat the published figure while one door run ended at 0.1169 against
0.110). So every table row that names a committed run is checked number by number against its
summary, and every sentence of a known kind (medians, "every run ... reached ...") is checked
against the runs it speaks of. Static reads only: no run is replayed here.
"""

from __future__ import annotations

import json
import re
import statistics
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "results" / "llm"
TASK_WORDS = {"car": "car_racing", "car_racing": "car_racing", "door": "door_open", "door_open": "door_open"}
PUBLISHED_REFINED = {"car_racing": 882.0, "door_open": 0.110}
HIGHER_IS_BETTER = {"car_racing": True, "door_open": False}
GROUPS = {"earlier": "legacy_published", "published": "published"}
"""How the documents name a group of runs, by the description variant the runs read."""


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
    return [f"{row['_key']}: {p}" for p in problems]


def group(name: str) -> dict[tuple[str, str], dict]:
    variant = GROUPS[name]
    return {k: s for k, s in summaries().items() if s["description"] == variant}


def _beats_published(task: str, value: float) -> bool:
    published = PUBLISHED_REFINED[task]
    return value >= published if HIGHER_IS_BETTER[task] else value <= published


def check_sentences(text: str) -> list[str]:
    """The kinds of sentences the documents make about the runs, each checked."""
    problems = []
    flat = " ".join(text.split())
    for found in re.finditer(r"[Mm]edians? over the (\w+) (earlier|published) runs[^:]*: car (\d+(?:\.\d+)?)[^,;]*, door "
                             r"(\d+(?:\.\d+)?)", flat):
        runs = group(found.group(2))
        for task, shown in (("car_racing", found.group(3)), ("door_open", found.group(4))):
            scores = [_score(s, "best") for (t, _), s in runs.items() if t == task]
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
        assert s["description"] in GROUPS.values() or s["description"] == "detailed", f"{task}/{run}"
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
