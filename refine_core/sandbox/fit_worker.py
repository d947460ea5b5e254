"""The trusted half of a sandboxed fit; its text is run as the sandbox script.

It builds the untrusted program (which executes the program's code, under the guard and the
seccomp filter), fits it to the demonstration and writes back only plain data: a JSON report
and the weights as an .npz of numeric arrays. Contract and fit failures are caught here and
reported by type name, so the parent can route them back to the analyst as typed errors.
"""

from __future__ import annotations

import json
import os
import traceback

import numpy as np


def _write_report(out_dir: str, report: dict) -> None:
    with open(os.path.join(out_dir, "report.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle)


def main(inputs_dir: str, out_dir: str) -> None:
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
        fit = fit_il(policy, inputs, actions, config, spec=spec)
        schema = validate_policy(policy, spec)
    except ContractError as exc:
        _write_report(out_dir, {"ok": False, "stage": "build", "error_type": type(exc).__name__,
                                "rule": getattr(exc, "rule", None), "message": str(exc)})
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
