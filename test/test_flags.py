"""Command-line flags come from the config dataclasses: one name per setting (the field's),
the field's docstring as help, old spellings accepted with a deprecation note, and a replay
takes every loop setting it is not given from the recorded run's first transcript line."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

import pytest
from frozen_prompts import FIXTURES

from refine_core.analyst.config import AnalystConfig, config_from_args
from refine_core.cli import build_parser, main
from refine_core.commands.run import loop_config_from
from refine_core.experiment.runner import ExperimentOptions
from refine_core.flags import add_flags, field_docs, given
from refine_core.learn.il import ILConfig
from refine_core.learn.rl import RLConfig
from refine_core.loop import RefineConfig
from refine_core.run_setup import RECORDED_LOOP_FIELDS


def _options(parser, command: str) -> dict[str, list[str]]:
    """dest -> option strings of one command's parser."""
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return {a.dest: a.option_strings for a in sub._actions if a.option_strings}


def _help(parser, command: str, dest: str) -> str:
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return next(a.help for a in sub._actions if a.dest == dest)


@pytest.mark.parametrize("command, cls, prefix, left_out", [
    ("run", RefineConfig, "", {"verbose"}),
    ("run", AnalystConfig, "llm_", {"api_key"}),
    ("fit", ILConfig, "", {"progress"}),
    ("rl", RLConfig, "", set()),
    ("experiment", ExperimentOptions, "", set()),
])
def test_every_field_is_a_flag_under_its_own_name_with_its_docstring(command, cls, prefix, left_out):
    parser = build_parser()
    options = _options(parser, command)
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        if f.name in left_out:
            continue
        dest = prefix + f.name
        assert dest in options, f"{command} has no flag for {cls.__name__}.{f.name}"
        spelled = f"--{dest.replace('_', '-')}"
        assert options[dest][0] in (spelled, f"{spelled}-set"), options[dest]
        assert docs[f.name].split(".")[0] in " ".join(_help(parser, command, dest).split()), f.name


def test_field_docs_and_flag_types_come_from_the_dataclass():
    @dataclass
    class Demo:
        count: int = 3
        """How many."""
        ratio: float | None = None
        """A ratio; None leaves it alone."""
        mode: str = field(default="a", metadata={"choices": ("a", "b")})
        """Which mode."""
        flag: bool = False
        """Switch it on."""
        seeds: tuple[int, ...] | None = None
        """Explicit seeds."""

    import argparse

    parser = argparse.ArgumentParser()
    add_flags(parser, Demo, aliases={"count": ("--n",)})
    assert field_docs(Demo) == {"count": "How many.", "ratio": "A ratio; None leaves it alone.",
                                "mode": "Which mode.", "flag": "Switch it on.", "seeds": "Explicit seeds."}
    args = parser.parse_args(["--n", "5", "--ratio", "0.5", "--mode", "b", "--flag", "--seeds", "1", "2"])
    assert given(args, Demo) == {"count": 5, "ratio": 0.5, "mode": "b", "flag": True, "seeds": (1, 2)}
    assert given(parser.parse_args([]), Demo) == {}, "nothing given: the dataclass's defaults apply"
    with pytest.raises(SystemExit):
        parser.parse_args(["--mode", "c"])


def test_old_spellings_still_work_and_say_they_are_deprecated(capsys):
    parser = build_parser()
    args = parser.parse_args(["run", "--rounds", "3", "--allow-weak-sandbox", "--model", "m", "--llm-timeout", "7"])
    err = capsys.readouterr().err
    for old, new in (("--rounds", "--max-rounds"), ("--allow-weak-sandbox", "--allow-weak-isolation"),
                     ("--model", "--llm-model"), ("--llm-timeout", "--llm-timeout-s")):
        assert f"{old} is deprecated; use {new}" in err
    config = loop_config_from(args, None)
    assert config.max_rounds == 3 and config.allow_weak_isolation is True
    assert (config_from_args(args, env={}).model, config_from_args(args, env={}).timeout_s) == ("m", 7.0)
    assert parser.parse_args(["rl", "--resets", "40"]).reset_budget == 40
    assert parser.parse_args(["experiment", "--task", "pendulum", "--rounds", "2"]).max_rounds == 2
    assert "--resets is deprecated" in capsys.readouterr().err
    parser.parse_args(["run", "--max-rounds", "3"])
    assert "deprecated" not in capsys.readouterr().err


def test_a_replay_takes_each_loop_setting_it_is_not_given_from_the_recorded_run():
    """The transcripts' first line names the settings as `RefineConfig` does (these were
    recorded before the flags were generated); a flag given on the command line wins."""
    parser = build_parser()
    for task in ("door_open", "car_racing"):
        settings = json.loads((FIXTURES / task / "transcript.jsonl").read_text().splitlines()[0])["settings"]
        config = loop_config_from(parser.parse_args(["run"]), settings)
        assert {k: getattr(config, k) for k in RECORDED_LOOP_FIELDS} == {k: settings[k] for k in RECORDED_LOOP_FIELDS}
        capped = loop_config_from(parser.parse_args(["run", "--max-steps", "7", "--eval-episodes", "1"]), settings)
        assert (capped.max_steps, capped.eval_episodes, capped.max_rounds) == (7, 1, settings["max_rounds"])
    fresh = loop_config_from(parser.parse_args(["run", "--quiet"]), None)
    assert dataclasses.replace(fresh, verbose=True) == RefineConfig(), "no flag, no recording: the defaults"


def test_nested_settings_are_checked_against_their_config(capsys):
    parser = build_parser()
    args = parser.parse_args(["run", "--il-set", "max_epochs=5", "--rl-set", "std_scale=0.5", "--rl-set", "window=10"])
    config = loop_config_from(args, None)
    assert config.il == {"max_epochs": 5} and config.rl == {"std_scale": 0.5, "window": 10}
    assert main(["run", "--task", "pendulum", "--analyst", "offline", "--il-set", "epochs=5"]) == 2
    assert "epochs: not a ILConfig field" in capsys.readouterr().err
    assert main(["run", "--task", "pendulum", "--analyst", "offline", "--max-rounds", "0"]) == 2
    assert "max_rounds must be at least 1" in capsys.readouterr().err


@pytest.mark.timeout(300)
def test_refine_rl_runs_one_instrumented_rl_training(tmp_path, capsys):
    out = tmp_path / "rl.json"
    assert main(["rl", "--task", "pendulum", "--program", "starter", "--reset-budget", "4", "--group-size", "2",
                 "--max-steps", "20", "--window", "10", "--eval-seeds", "1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "u  1 ret" in printed and "eval_final: mean action" in printed
    record = json.loads(out.read_text())
    assert record["rl"]["config"]["reset_budget"] == 4 and record["rl"]["updates"] == 2
    assert set(record) >= {"rl", "eval_il", "eval_final"}
    assert main(["rl", "--task", "pendulum"]) == 2 and "--program is required" in capsys.readouterr().err


def test_a_verb_builds_only_its_own_flags_so_refine_tasks_never_imports_torch():
    import subprocess
    import sys

    code = ("import contextlib, io, sys\nfrom refine_core.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['tasks']) == 0\n"
            "print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    parser = build_parser("tasks")
    assert "--max-rounds" not in parser.format_help() and "run" in parser.format_help()
