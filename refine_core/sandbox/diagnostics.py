"""Diagnostic analysis code over a rollout table, in the sandbox.

The tables travel as CSV files bound read-only into the sandbox (pyarrow is not a dependency,
and CSV with pandas' default float formatting round-trips float64 exactly). The bootstrap's
diagnostics prologue loads them as `df` and `demo` before the guard goes up and provides
`np`, `pd` and `scipy`; the analyst's code runs from its own file, so a traceback's line
numbers are the analyst's line numbers. What the code prints is the result.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pandas as pd

from refine_core.sandbox.limits import Limits, SandboxResult
from refine_core.sandbox.runner import SandboxConfigError, run_script

DIAGNOSTICS_LIMITS = Limits(wall_s=60.0, cpu_s=60, memory_bytes=3 * 1024**3)
# Imported before the guard is installed (their import-time ctypes and /proc use would be
# refused). scipy submodules such as scipy.stats (about 1 s) are preloaded only when the code
# names them: a script that does not use them does not pay, and one that does imports them
# without the audit hook's per-file cost. Anything else imports lazily under the guard.
PRELOAD = ("numpy", "pandas", "scipy")
_SCIPY_SUBMODULES = frozenset({"stats", "signal", "optimize", "linalg", "interpolate",
                               "spatial", "ndimage", "fft", "integrate", "special", "cluster"})
_SCIPY_DOTTED = re.compile(r"\bscipy\.([a-z_]+)")
_SCIPY_FROM = re.compile(r"\bfrom\s+scipy\s+import\s+(\([^)]*\)|[^\n#;]+)")


def preload_for(code: str) -> tuple[str, ...]:
    """The base preloads plus the known scipy submodules `code` mentions."""
    names = set(_SCIPY_DOTTED.findall(code))
    for group in _SCIPY_FROM.findall(code):
        for part in group.strip("() \t").split(","):
            words = part.split()
            if words:
                names.add(words[0])
    extra = sorted(f"scipy.{name}" for name in names & _SCIPY_SUBMODULES)
    return PRELOAD + tuple(extra)


def run_diagnostics(
    code: str,
    table: pd.DataFrame,
    demo_table: pd.DataFrame | None = None,
    limits: Limits = DIAGNOSTICS_LIMITS,
    *,
    allow_weak_isolation: bool = False,
    timeout_s: float | None = None,
) -> SandboxResult:
    """Run diagnostic `code` with `df` (the rollout table) and `demo` (the demonstration
    table, or None) loaded; returns the sandbox result whose `stdout` is the analysis.
    `timeout_s` overrides `limits.wall_s`."""
    if not isinstance(table, pd.DataFrame):
        raise SandboxConfigError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    if demo_table is not None and not isinstance(demo_table, pd.DataFrame):
        raise SandboxConfigError(
            f"demo_table must be a pandas DataFrame or None, got {type(demo_table).__name__}"
        )
    with tempfile.TemporaryDirectory(prefix="refine-diag-") as tmp:
        inputs = {"table.csv": Path(tmp, "table.csv")}
        table.to_csv(inputs["table.csv"], index=False)
        tables: dict[str, str | None] = {"df": "table.csv", "demo": None}
        if demo_table is not None:
            inputs["demo.csv"] = Path(tmp, "demo.csv")
            demo_table.to_csv(inputs["demo.csv"], index=False)
            tables["demo"] = "demo.csv"
        return run_script(
            code,
            inputs=inputs,
            limits=limits,
            allow_weak_isolation=allow_weak_isolation,
            mode="diagnostics",
            preload=preload_for(code),
            tables=tables,
            timeout_s=timeout_s,
        )
