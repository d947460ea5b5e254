"""Build and fit a generated policy program inside the sandbox.

A program is code from an analyst, and building it runs that code, so the main process never
does: it only runs the static check (cheap, refuses the obvious before a process is spent),
then hands source text, demonstration arrays and the IL config to the sandbox and takes back
plain data. Weights come back as an .npz loaded with ``allow_pickle=False`` (arrays only,
never code), the report as JSON.

The fit has a validation phase with its own short budget (`FIT_VALIDATION_S`, CPU seconds):
building the program, the contract check and the first two epochs must finish within it, and
those epochs must show the fit can end within its limit. A `forward` that never returns is
thus refused in seconds, with the phase and the reason, instead of after the fit's whole
wall-clock limit.

While it runs, the worker prints one progress line per epoch (`on_epoch` hears them), and a
caller can cancel it (`cancel`): the learner's FitProgram action reports the first as
feedback and honours the second, so a fit can be watched and stopped from the command line.
"""

from __future__ import annotations

import dataclasses
import io
import json
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from refine_core.sandbox.fit_worker import PROGRESS
from refine_core.sandbox.limits import Limits, SandboxResult
from refine_core.sandbox.runner import (
    CHECKPOINT_WALL_FACTOR,
    SandboxConfigError,
    run_script,
    with_timeout,
)

FIT_LIMITS = Limits(wall_s=600.0, cpu_s=1200, memory_bytes=6 * 1024**3)
FIT_VALIDATION_S = 20.0
"""CPU seconds (the sandbox's processes', from its start, torch import included) for the
validation phase: build, contract check and two epochs. The bundled door program needs about
2.6 s, whether the machine is idle or busy; by the clock the same phase took 3.8 s beside four
busy loops and, on a more crowded machine, over 20 s, so the budget counts work, not waiting.
A program spinning in `forward` is refused when it has used this much; one that blocks without
computing, after `CHECKPOINT_WALL_FACTOR` times as many seconds of wall clock."""
PRELOAD = ("numpy", "torch", "refine_core.policy.contract", "refine_core.learn.il",
           "refine_core.tasks.registry")
_WORKER = Path(__file__).with_name("fit_worker.py")


@dataclass
class SandboxFit:
    """Outcome of one sandboxed fit. `status`: ok, contract_error (the program broke a rule;
    `error_type` names the ContractError subclass), fit_error, or the sandbox's own status
    (refused, error, timeout, killed) when the worker did not get to report."""

    status: str
    report: dict | None = None
    weights: dict[str, np.ndarray] | None = None
    error: str | None = None
    error_type: str | None = None
    rule: str | None = None
    result: SandboxResult = field(default_factory=lambda: SandboxResult(status="refused"))
    phase: str | None = None
    """Where a failed fit stopped: "validation" (build, contract check, first epochs, under
    the short deadline) or "fit" (the long fit); None when it succeeded."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _static_check(source: str) -> tuple[str, str, str | None] | None:
    try:
        from refine_core.policy.static_check import check_program_source
    except ImportError:  # the check module is optional at this seam; the worker checks again
        return None
    try:
        check_program_source(source)
    except Exception as exc:  # noqa: BLE001 - every refusal becomes a typed result
        return type(exc).__name__, str(exc), getattr(exc, "rule", None)
    return None


def _load_weights(data: bytes) -> dict[str, np.ndarray]:
    weights: dict[str, np.ndarray] = {}
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        for key in archive.files:
            array = archive[key]
            if array.dtype.kind not in "biufc":
                raise ValueError(f"weight {key!r} has non-numeric dtype {array.dtype}")
            weights[key] = array
    return weights


def fit_in_sandbox(
    source: str,
    task_name: str,
    demo_inputs: dict[str, np.ndarray],
    demo_actions: np.ndarray,
    il_config: dict,
    limits: Limits = FIT_LIMITS,
    *,
    allow_weak_isolation: bool = False,
    timeout_s: float | None = None,
    validation_s: float | None = FIT_VALIDATION_S,
    on_epoch: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> SandboxFit:
    """Statically check, then build and fit `source` for `task_name` in the sandbox.

    `il_config` holds `ILConfig` fields (an `ILConfig` itself is accepted too); `timeout_s`
    overrides `limits.wall_s`; `validation_s` is the validation phase's deadline (None: one
    deadline for everything, as before); `on_epoch(epoch, max_epochs)` hears every finished
    epoch; setting `cancel` kills the fit (status "cancelled").
    """
    if not isinstance(source, str):
        raise SandboxConfigError(f"source must be a string, got {type(source).__name__}")
    if dataclasses.is_dataclass(il_config) and not isinstance(il_config, type):
        il_config = dataclasses.asdict(il_config)
    if not isinstance(il_config, dict):
        raise SandboxConfigError(f"il_config must be a dict, got {type(il_config).__name__}")
    limits = with_timeout(limits, timeout_s)
    refused = _static_check(source)
    if refused is not None:
        name, message, rule = refused
        return SandboxFit(
            status="contract_error", error=message, error_type=name, rule=rule,
            result=SandboxResult(status="refused", message=f"static check: {message}"), phase="validation",
        )
    try:
        job_json = json.dumps({"task": task_name, "il_config": il_config, "budget_s": limits.wall_s})
    except (TypeError, ValueError) as exc:
        raise SandboxConfigError(f"il_config must be JSON-serialisable: {exc}") from None
    arrays = {"actions": np.asarray(demo_actions)}
    for name, value in demo_inputs.items():
        arrays[f"input_{name}"] = np.asarray(value)
    for key, array in arrays.items():
        if array.dtype.kind not in "biuf":
            raise SandboxConfigError(f"demonstration array {key!r} is not numeric ({array.dtype})")

    with tempfile.TemporaryDirectory(prefix="refine-fit-") as tmp:
        paths = {name: Path(tmp, name) for name in ("job.json", "program.py", "demo.npz")}
        paths["job.json"].write_text(job_json, encoding="utf-8")
        paths["program.py"].write_text(source, encoding="utf-8")
        np.savez(paths["demo.npz"], **arrays)
        script = _WORKER.read_text(encoding="utf-8") + "\nmain(INPUTS_DIR, OUT_DIR)\n"
        checkpoint = validation_s if validation_s is not None and validation_s < limits.wall_s else None
        epochs = [0]
        result = run_script(script, inputs=paths, limits=limits, checkpoint_s=checkpoint,
                            allow_weak_isolation=allow_weak_isolation, preload=PRELOAD,
                            on_line=lambda line: _progress(line, epochs, on_epoch), cancel=cancel)
    if result.status == "cancelled":
        return SandboxFit(status="cancelled", error=f"cancelled by the caller after {epochs[0]} epochs",
                          result=result, phase="validation" if result.checkpoint_reached is False else "fit")
    return _interpret(result, checkpoint)


def _progress(line: str, epochs: list[int], on_epoch: Callable[[int, int], None] | None) -> None:
    """A worker's progress line -> `on_epoch`; any other line is the program's own output."""
    parts = line.split()
    if len(parts) != 3 or parts[0] != PROGRESS:
        return
    epochs[0] = int(parts[1])
    if on_epoch is not None:
        on_epoch(int(parts[1]), int(parts[2]))


def _interpret(result: SandboxResult, checkpoint: float | None = None) -> SandboxFit:
    raw = result.outputs.get("report.json")
    phase = "validation" if result.checkpoint_reached is False else "fit"
    if result.status != "ok" or raw is None:
        if result.status == "timeout" and result.checkpoint_reached is False:
            used = result.checkpoint_cpu_s or 0.0
            budget = (f"{checkpoint:g} s of CPU time (used {used:.1f} s in {result.duration_s:.1f} s)"
                      if used >= checkpoint else
                      f"{checkpoint * CHECKPOINT_WALL_FACTOR:g} s (it computed for {used:.1f} s of them: "
                      "blocked, not computing)")
            why = (f"validation phase: building the program, checking it and its first two training epochs did "
                   f"not finish within {budget} (a forward pass that never returns, or one far too slow "
                   "to fit); the long fit was not started")
        else:
            why = f"{phase} phase: " + (result.message or f"the fit worker did not report (status {result.status})")
        tail = result.stderr_tail.strip().splitlines()[-1:] if result.stderr_tail else []
        return SandboxFit(status=result.status if result.status != "ok" else "error",
                          error="; ".join([why, *tail]), result=result, phase=phase)
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return SandboxFit(status="error", error=f"unreadable fit report: {exc}", result=result, phase=phase)
    if not payload.get("ok"):
        stage = payload.get("stage")
        status = "contract_error" if stage == "build" else "fit_error"
        return SandboxFit(status=status, error=payload.get("message"),
                          error_type=payload.get("error_type"), rule=payload.get("rule"),
                          result=result, phase="validation" if stage in ("build", "validate") else phase)
    try:
        weights = _load_weights(result.outputs["weights.npz"])
    except (KeyError, ValueError, OSError) as exc:
        return SandboxFit(status="error", error=f"unreadable fitted weights: {exc}",
                          result=result)
    return SandboxFit(status="ok", report=payload.get("report"), weights=weights, result=result)
