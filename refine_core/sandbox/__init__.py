"""Isolated execution of generated code: diagnostics and policy fits (see runner.py)."""

from refine_core.sandbox.diagnostics import run_diagnostics
from refine_core.sandbox.fit import SandboxFit, fit_in_sandbox
from refine_core.sandbox.limits import Limits, SandboxResult
from refine_core.sandbox.runner import SandboxConfigError, require_sandbox, run_script

__all__ = [
    "Limits",
    "SandboxConfigError",
    "SandboxFit",
    "SandboxResult",
    "fit_in_sandbox",
    "require_sandbox",
    "run_diagnostics",
    "run_script",
]
