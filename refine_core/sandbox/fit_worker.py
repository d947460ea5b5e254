"""The trusted half of a sandboxed fit; its text is run as the sandbox script.

It builds the untrusted program (which executes the program's code, under the guard and the
seccomp filter), fits it to the demonstration and writes back only plain data: a JSON report
and the weights as an .npz of numeric arrays. Contract and fit failures are caught here and
reported by type name, so the parent can route them back to the analyst as typed errors.

Two phases, because a program whose forward never returns must be refused in seconds, not at
the end of the fit's long wall-clock limit: the validation phase (build, contract check, the
first two epochs, timed) runs under the parent's short checkpoint deadline; once the two
epochs show the fit can finish within its limit, the worker prints the checkpoint marker and
the parent grants the full limit. A fit that would need longer than its limit (at the very
least `patience` epochs before early stopping can end it) is refused right there.
"""

from __future__ import annotations

import json
import os
import traceback

import numpy as np

PROGRESS = "@@refine-fit-epoch@@"
"""Printed with the epoch and the most epochs after every finished epoch: the parent turns
these lines into progress (the learner's FitProgram feedback) while the fit runs."""


def _write_report(out_dir: str, report: dict) -> None:
    with open(os.path.join(out_dir, "report.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle)


class _TooSlow(Exception):
    """The first epochs show the fit cannot end within its wall-clock limit."""


def _pace(config, budget_s: float, started: float):
    """The `after_epoch` hook of the validation phase: after epoch 2, compare the least time
    the fit can take with its budget, then print the checkpoint marker (the parent then
    grants the full budget)."""
    import time

    from refine_core.sandbox.limits import CHECKPOINT

    first: list[float] = []

    def after_epoch(epoch: int, seconds: float) -> None:
        if epoch == 1:
            first.append(seconds)
        elif epoch == 2:
            per_epoch = seconds - first[0]
            least = min(config.max_epochs, config.patience)  # early stopping cannot end sooner
            need = time.monotonic() - started + (least - epoch) * per_epoch
            if need > budget_s:
                raise _TooSlow(
                    f"validation phase: one training epoch on the demonstration takes {per_epoch:.3g} s, and "
                    f"early stopping needs at least {least} epochs, about {need:.0f} s in all, more than the "
                    f"fit's {budget_s:g} s limit; make the forward pass cheaper")
            print(CHECKPOINT, flush=True)

    return after_epoch


def main(inputs_dir: str, out_dir: str) -> None:
    import time

    started = time.monotonic()
    from refine_core.learn.il import FitError, ILConfig, fit_il
    from refine_core.policy.contract import build_policy, validate_policy
    from refine_core.policy.errors import ContractError
    from refine_core.tasks.registry import get_task

    with open(os.path.join(inputs_dir, "job.json"), encoding="utf-8") as handle:
        job = json.load(handle)
    with open(os.path.join(inputs_dir, "program.py"), encoding="utf-8") as handle:
        source = handle.read()
    with np.load(os.path.join(inputs_dir, "demo.npz"), allow_pickle=False) as demo:
        actions = demo["actions"]
        inputs = {key[len("input_"):]: demo[key] for key in demo.files if key.startswith("input_")}
    try:
        spec = get_task(job["task"]).spec
        config = ILConfig(**job["il_config"])
        policy = build_policy(source, spec)
        budget = float(job.get("budget_s") or 0.0)
        pace = _pace(config, budget, started) if budget > 0 else None

        def after_epoch(epoch: int, seconds: float) -> None:
            if pace is not None:
                pace(epoch, seconds)
            print(f"{PROGRESS} {epoch} {config.max_epochs}", flush=True)

        fit = fit_il(policy, inputs, actions, config, spec=spec, after_epoch=after_epoch)
        schema = validate_policy(policy, spec)
    except ContractError as exc:
        _write_report(out_dir, {"ok": False, "stage": "build", "error_type": type(exc).__name__,
                                "rule": getattr(exc, "rule", None), "message": str(exc)})
        return
    except _TooSlow as exc:
        _write_report(out_dir, {"ok": False, "stage": "validate", "error_type": "FitTooSlow",
                                "rule": None, "message": str(exc)})
        return
    except (FitError, ValueError, TypeError, RuntimeError, ArithmeticError) as exc:
        _write_report(out_dir, {"ok": False, "stage": "fit", "error_type": type(exc).__name__,
                                "rule": None, "message": f"{exc}\n{traceback.format_exc(limit=-3)}"})
        return
    np.savez(os.path.join(out_dir, "weights.npz"), **fit.weights)
    report = fit.to_dict()
    report["info_schema"] = {"weights": list(schema.weights), "latents": list(schema.latents),
                             "warnings": list(schema.warnings)}
    _write_report(out_dir, {"ok": True, "report": report})
