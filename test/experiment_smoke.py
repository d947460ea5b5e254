"""`refine experiment --smoke` into a temporary folder, for the experiment tests (split over
several modules so that a parallel run can spread them over its workers)."""

from pathlib import Path

from refine_core.cli import main


def smoke(tmp_path: Path, task: str, *extra: str) -> Path:
    """The results folder of a smoke experiment on `task` with the extra CLI arguments."""
    out = tmp_path / "results"
    assert main(["experiment", "--task", task, "--smoke", "--out", str(out), "--date", "t", *extra]) == 0
    return out / task / "t"
