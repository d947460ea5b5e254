"""`refine tasks / record / fit / eval`: exit codes, one-line errors and what lands in the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from refine_core.cli import main
from refine_core.store import RunDatabase
from refine_core.tasks import get_task, task_names

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

BAD_SHAPE = """\
import torch
from torch import nn

class OpenDoorPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = nn.Parameter(torch.ones(1))

    def forward(self, features):
        mean = features[:, :3] * self.k
        tril = torch.diag_embed(torch.ones_like(mean))
        return mean, tril, {}
"""


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.fixture(scope="module")
def door_run(tmp_path_factory):
    """A run directory with the door demonstration recorded once for the module."""
    run = tmp_path_factory.mktemp("cli") / "run"
    assert main(["record", "--task", "door_open", "--run", str(run)]) == 0
    return run


@pytest.mark.parametrize("verb", ["tasks", "record", "fit", "eval"])
def test_every_verb_has_help(verb, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([verb, "--help"])
    assert exit_info.value.code == 0
    assert "--" in capsys.readouterr().out


def test_tasks_lists_inputs_actions_and_metric(capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "car_racing" in out and "door_open" in out
    assert "tiles (12, 4)" in out and "features (39,)" in out
    assert "steer [-1, 1]" in out and "min_handle_target_distance (lower is better)" in out
    assert main(["tasks", "--json"]) == 0
    facts = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert facts["door_open"]["actions"]["gripper"] == [0.0, 1.0]


def test_unknown_task_exits_2_with_one_line(tmp_path, capsys):
    assert main(["record", "--task", "juggling", "--run", str(tmp_path / "r")]) == 2
    line = _error_line(capsys)
    assert "unknown task 'juggling'" in line and "door_open" in line
    assert main(["tasks", "juggling"]) == 2


def test_record_stores_the_demonstration_and_refuses_to_overwrite(door_run, capsys):
    with RunDatabase(door_run) as db:
        run = db.latest_run()
        demo = db.load_demonstration(run["id"])
        assert run["task"] == "door_open" and demo["steps"] == 500 and demo["success"] == 1.0
        assert len(db.load_steps(run["id"], kind="demo")) == 500
    capsys.readouterr()
    assert main(["record", "--task", "door_open", "--run", str(door_run)]) == 2
    assert "--force" in _error_line(capsys)
    assert main(["record", "--task", "car_racing", "--run", str(door_run)]) == 2
    assert "holds a run of task 'door_open'" in _error_line(capsys)


def test_fit_rejects_missing_file_missing_run_and_invalid_programs(door_run, tmp_path, capsys):
    capsys.readouterr()
    assert main(["fit", "--run", str(door_run), "--program", str(tmp_path / "nope.py")]) == 2
    assert "not found" in _error_line(capsys)
    assert main(["fit", "--run", str(tmp_path / "norun"), "--program", "starter"]) == 2
    assert "no run database" in _error_line(capsys)
    bad = tmp_path / "bad.py"
    bad.write_text(BAD_SHAPE)
    assert main(["fit", "--run", str(door_run), "--program", str(bad)]) == 2
    assert "[action_shape]" in _error_line(capsys)
    bad.write_text("class OpenDoorPolicy(:\n")
    assert main(["fit", "--run", str(door_run), "--program", str(bad)]) == 2
    assert "[syntax]" in _error_line(capsys)
    with RunDatabase(door_run) as db:
        assert db.rounds(db.latest_run()["id"]) == []


def test_fit_then_eval_stores_round_episodes_and_steps(door_run, tmp_path, capsys):
    from refine_core.policy.programs import starter_program

    program = tmp_path / "starter.py"
    program.write_text(starter_program("door_open"))
    assert main(["fit", "--run", str(door_run), "--program", str(program),
                 "--max-epochs", "30"]) == 0
    assert "round 0: fitted" in capsys.readouterr().out
    assert main(["eval", "--run", str(door_run), "--episodes", "2", "--max-steps", "60"]) == 0
    out = capsys.readouterr().out
    assert "round 0: return" in out and "±" in out and "success" in out
    with RunDatabase(door_run) as db:
        run_id = db.latest_run()["id"]
        row = db.round(run_id, 0)
        assert row["status"] == "committed" and row["program"] == program.read_text()
        assert row["weights"] and row["fit_report"]["epochs"] <= 30
        first_two = list(get_task("door_open").spec.eval_seeds[:2])  # the verified mode's seeds
        assert row["metrics"]["eval"]["seeds"] == first_two
        assert row["eval_metric"] == pytest.approx(row["metrics"]["eval"]["metric_mean"])
        episodes = db.episodes(run_id, round=0, kind="eval")
        assert episodes["seed"].tolist() == first_two and (episodes["complete"] == 1).all()
        steps = db.load_steps(run_id, round=0, kind="eval")
        assert len(steps) == 120 and "next_handle_x" in steps
        assert "expert_dx" not in steps, "evaluation tables carry no privileged expert labels"
    assert main(["eval", "--run", str(door_run), "--round", "5"]) == 2
    assert "not a committed round" in _error_line(capsys)


def test_console_script_exit_status(tmp_path):
    exe = Path(sys.executable).parent / "refine"
    if not exe.exists():
        pytest.skip("the `refine` console script is not installed in this environment")
    proc = subprocess.run([str(exe), "record", "--task", "nope", "--run", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"refine record: error: unknown task 'nope'; known tasks: {', '.join(task_names())}"
    ]


def test_the_demo_replays_the_median_published_run_when_it_is_there(tmp_path):
    from refine_ros.commands.demo import SHOWN_RUN, recorded_transcript

    for name in ("a-demo-access-run", SHOWN_RUN):
        (tmp_path / name).mkdir()
        (tmp_path / name / "transcript.jsonl").write_text("{}\n")
    assert recorded_transcript(tmp_path) == tmp_path / SHOWN_RUN / "transcript.jsonl"
    (tmp_path / SHOWN_RUN / "transcript.jsonl").unlink()
    assert recorded_transcript(tmp_path) == tmp_path / "a-demo-access-run" / "transcript.jsonl"
    assert recorded_transcript(tmp_path / "none") is None
