"""The offline analyst's diagnostic battery: analysis code generated from a program and a schema.

Why generated and not a fixed script: which checks make sense depends on the program (which
weights it reports and what sign its author expected, which latents are closed-form
combinations that can be recomputed) and on the table's columns, and METHOD.md has the
diagnostics written from the program and the column names only, before any rollout number is
seen. The output is plain Python over `df` (the rollout) and `demo` (the demonstration) using
NumPy, pandas and SciPy. Every check prints one line

    CHECK <id> <PASS|FAIL|INFO|SKIP|ERROR> key=value ...

and runs inside its own guard, so a missing column or a NaN makes that one line SKIP or
ERROR instead of ending the script.
"""

from __future__ import annotations

from refine_core.analyst.offline.introspect import read_program
from refine_core.tasks.spec import TaskSpec

_PRELUDE = '''\
import math
import warnings

import numpy as np
import pandas as pd

try:
    from scipy import stats as _stats
except Exception:  # scipy missing: the KS statistic is computed by hand
    _stats = None

# Empty or all-NaN slices are expected (a constant action never flips); they print nan.
warnings.simplefilter("ignore")


class _Missing(Exception):
    pass


def _fmt(value):
    if isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        value = float(value)
        return "nan" if not math.isfinite(value) else f"{value:.4g}"
    return str(value).replace(" ", "_") or "-"


def _emit(check, status, **values):
    fields = " ".join(f"{k}={_fmt(v)}" for k, v in values.items())
    print(f"CHECK {check} {status} {fields}".rstrip())


def _run(check, fn, *args):
    try:
        fn(check, *args)
    except _Missing as missing:
        _emit(check, "SKIP", missing=missing.args[0])
    except Exception as exc:  # one broken check never ends the battery
        _emit(check, "ERROR", error=type(exc).__name__)


def _col(frame, name):
    if frame is None or name not in frame.columns:
        raise _Missing(name)
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)


def C(name):
    """A rollout column as the program sees it (NaN replaced by zero, like nan_to_num)."""
    return np.nan_to_num(_col(df, name))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _relu(x):
    return np.maximum(x, 0.0)


def _corr(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.std(a[ok]) < 1e-12 or np.std(b[ok]) < 1e-12:
        return float("nan")
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def _groups(frame):
    keys = [k for k in ("seed", "episode") if k in frame.columns]
    return [g for _, g in frame.groupby(keys, sort=True)] if keys else [frame]


def _ks(a, b):
    if _stats is not None:
        return float(_stats.ks_2samp(a, b).statistic)
    grid = np.sort(np.concatenate([a, b]))
    fa = np.searchsorted(np.sort(a), grid, side="right") / len(a)
    fb = np.searchsorted(np.sort(b), grid, side="right") / len(b)
    return float(np.max(np.abs(fa - fb)))


def _clipped_mean(action, low, high):
    return np.clip(_col(df, "mean_" + action), low, high)


def _table_check(check):
    episodes = len(_groups(df))
    _emit(check, "INFO", rows=len(df), episodes=episodes, columns=len(df.columns),
          demo_rows=0 if demo is None else len(demo))


def _sign_check(check, key, initial):
    values = _col(df, key)
    values = values[np.isfinite(values)]
    if len(values) == 0:
        _emit(check, "SKIP", reason="no_finite_values")
        return
    fitted = float(np.median(values))
    if initial == 0:
        status = "INFO"
    else:
        status = "PASS" if np.sign(fitted) == np.sign(initial) else "FAIL"
    _emit(check, status, initial=initial, fitted=fitted, ratio=fitted / initial if initial else float("nan"))


def _recon_check(check, latent, recompute):
    logged = _col(df, latent)
    value = np.asarray(recompute(), dtype=float) * np.ones(len(df))
    ok = np.isfinite(logged) & np.isfinite(value)
    if ok.sum() == 0:
        _emit(check, "SKIP", reason="no_finite_values")
        return
    err = np.abs(value[ok] - logged[ok])
    scale = max(float(np.std(logged[ok])), float(np.mean(np.abs(logged[ok]))), 1e-6)
    rel = float(np.max(err)) / scale
    _emit(check, "PASS" if rel < 1e-3 else "FAIL", max_abs_err=float(np.max(err)), rel_err=rel)


def _saturation_check(check, action, low, high):
    act = _col(df, "act_" + action)
    mean = _col(df, "mean_" + action)
    span = (high - low) * 1e-3
    at_low = float(np.mean(act <= low + span))
    at_high = float(np.mean(act >= high - span))
    outside = float(np.mean((mean < low) | (mean > high)))
    values = dict(low=at_low, high=at_high, mean_outside=outside)
    status = "INFO"
    if "expert_" + action in df.columns:
        expert = _col(df, "expert_" + action)
        e_low = float(np.mean(expert <= low + span))
        e_high = float(np.mean(expert >= high - span))
        values.update(expert_low=e_low, expert_high=e_high)
        status = "FAIL" if max(abs(at_low - e_low), abs(at_high - e_high)) > 0.3 else "PASS"
    _emit(check, status, **values)


def _corr_check(check, latent, action):
    lat = _col(df, latent)
    values = dict(r=_corr(lat, _col(df, "mean_" + action)))
    if "expert_" + action in df.columns:
        values["r_expert"] = _corr(lat, _col(df, "expert_" + action))
    _emit(check, "INFO", **values)


def _shift_check(check, column):
    roll = _col(df, column)
    ref = _col(demo, column)
    roll = roll[np.isfinite(roll)]
    ref = ref[np.isfinite(ref)]
    if len(roll) < 2 or len(ref) < 2:
        _emit(check, "SKIP", reason="too_few_values")
        return
    spread = float(np.std(ref))
    if spread < 1e-9 and float(np.std(roll)) < 1e-9:
        _emit(check, "INFO", constant=1, roll_mean=float(np.mean(roll)), demo_mean=float(np.mean(ref)))
        return
    smd = (float(np.mean(roll)) - float(np.mean(ref))) / max(spread, 1e-9)
    ks = _ks(roll, ref)
    status = "FAIL" if abs(smd) > 1.0 or ks > 0.5 else "PASS"
    _emit(check, status, smd=smd, ks=ks, roll_mean=float(np.mean(roll)), demo_mean=float(np.mean(ref)))


def _expert_check(check, action, low, high):
    expert = _col(df, "expert_" + action)
    mean = _clipped_mean(action, low, high)
    ok = np.isfinite(expert) & np.isfinite(mean)
    err = expert[ok] - mean[ok]
    if len(err) == 0:
        _emit(check, "SKIP", reason="no_finite_values")
        return
    rmse = float(np.sqrt(np.mean(err**2)))
    spread = float(np.std(expert[ok]))
    r = _corr(expert[ok], mean[ok])
    if spread < 1e-9:
        status = "PASS" if rmse < 0.1 * (high - low) else "FAIL"
    else:
        status = "PASS" if (r >= 0.8 and rmse < spread) else "FAIL"
    _emit(check, status, rmse=rmse, bias=float(np.mean(err)), r=r, expert_std=spread)


def _hotspot_check(check, action, low, high, feature):
    err = _col(df, "expert_" + action) - _clipped_mean(action, low, high)
    value = np.asarray(feature(), dtype=float) * np.ones(len(df))
    ok = np.isfinite(err) & np.isfinite(value)
    err, value = err[ok], value[ok]
    if len(err) < 10:
        _emit(check, "SKIP", reason="too_few_rows")
        return
    bins = pd.qcut(value, 5, duplicates="drop")
    frame = pd.DataFrame({"sq": err**2, "bin": bins})
    per_bin = frame.groupby("bin", observed=True)["sq"].agg(["mean", "sum"])
    worst = per_bin["mean"].idxmax()
    total = float(frame["sq"].sum())
    overall = math.sqrt(float(frame["sq"].mean()))
    worst_rmse = math.sqrt(float(per_bin.loc[worst, "mean"]))
    _emit(
        check, "INFO",
        worst_lo=float(worst.left), worst_hi=float(worst.right), worst_rmse=worst_rmse,
        overall_rmse=overall, ratio=worst_rmse / overall if overall > 0 else float("nan"),
        low_bin_share=float(per_bin["sum"].iloc[0]) / total if total > 0 else float("nan"),
        r_err=_corr(err, value), r_abs=_corr(np.abs(err), value),
    )


def _disagreement_check(check, action, low, high, columns):
    err = _col(df, "expert_" + action) - _clipped_mean(action, low, high)
    scores = []
    for name in columns:
        if name in df.columns:
            r = _corr(err, _col(df, name))
            if math.isfinite(r):
                scores.append((abs(r), name, r))
    scores.sort(key=lambda s: (-s[0], s[1]))
    values = {}
    for i, (_, name, r) in enumerate(scores[:3], 1):
        values[f"top{i}"] = name
        values[f"r{i}"] = r
    _emit(check, "INFO", **values)


def _flips(x):
    d = np.diff(x[np.isfinite(x)])
    d = d[np.abs(d) > 1e-9]
    return float(np.mean(np.sign(d[1:]) != np.sign(d[:-1]))) if len(d) > 2 else float("nan")


def _temporal_check(check, action):
    flips, expert_flips, jumps = [], [], []
    for g in _groups(df):
        mean = _col(g, "mean_" + action)
        flips.append(_flips(mean))
        jumps.append(float(np.nanmean(np.abs(np.diff(mean)))) if len(mean) > 1 else float("nan"))
        if "expert_" + action in g.columns:
            expert_flips.append(_flips(_col(g, "expert_" + action)))
    flip = float(np.nanmean(flips)) if flips else float("nan")
    expert_flip = float(np.nanmean(expert_flips)) if expert_flips else float("nan")
    ratio = flip / expert_flip if expert_flip and math.isfinite(expert_flip) else float("nan")
    _emit(check, "INFO", flip_rate=flip, expert_flip_rate=expert_flip, flip_ratio=ratio,
          mean_abs_step=float(np.nanmean(jumps)) if jumps else float("nan"))


def _metric_generic(check):
    returns = [float(np.nansum(_col(g, "reward"))) for g in _groups(df)]
    _emit(check, "INFO", mean_return=float(np.mean(returns)), min_return=float(np.min(returns)),
          episodes=len(returns))
'''

_CAR_METRIC = '''

def _metric_car(check, offset, speed):
    returns, offtrack, speeds, steps = [], [], [], []
    for g in _groups(df):
        returns.append(float(np.nansum(_col(g, "reward"))))
        offtrack.append(float(np.mean(np.abs(_col(g, offset)) > HALF_WIDTH)))
        speeds.append(float(np.nanmean(_col(g, speed))))
        steps.append(len(g))
    demo_return = float(np.nansum(_col(demo, "reward"))) if demo is not None and "reward" in demo else float("nan")
    _emit(check, "INFO", mean_return=float(np.mean(returns)), min_return=float(np.min(returns)),
          demo_return=demo_return, offtrack_frac=float(np.mean(offtrack)),
          mean_speed=float(np.mean(speeds)), steps=float(np.mean(steps)))
'''

_DOOR_METRIC = '''

def _distance(frame, a, b):
    return np.sqrt(sum((_col(frame, x) - _col(frame, y)) ** 2 for x, y in zip(a, b)))


def _metric_door(check, gripper, handle, target):
    mins, initial, final, decrease, grip_min, near = [], [], [], [], [], []
    for g in _groups(df):
        d = _distance(g, handle, target)
        reach = _distance(g, gripper, handle)
        mins.append(float(np.nanmin(d)))
        initial.append(float(d[0]))
        final.append(float(d[-1]))
        decrease.append((float(d[0]) - float(np.nanmin(d))) / max(float(d[0]), 1e-9))
        grip_min.append(float(np.nanmin(reach)))
        near.append(float(np.mean(reach < NEAR_HANDLE)))
    demo_min = float(np.nanmin(_distance(demo, handle, target))) if demo is not None else float("nan")
    _emit(check, "INFO", min_handle_target=float(np.mean(mins)), demo_min=demo_min,
          initial=float(np.mean(initial)), final=float(np.mean(final)),
          decrease_frac=float(np.mean(decrease)), min_gripper_handle=float(np.mean(grip_min)),
          near_frac=float(np.mean(near)))
'''


def _quote(name: str) -> str:
    return repr(str(name))


def _task_features(spec: TaskSpec) -> tuple[dict[str, str], list[str], str]:
    """(state features for the disagreement hot spots as expressions, extra helper code, the
    metric check call) for the bundled tasks, with column names taken from the spec."""
    names = {s.name for s in spec.inputs}
    features = _registered_features(spec)
    if spec.name == "car_racing" and {"tiles", "indicators"} <= names:
        tiles = spec.input("tiles").columns
        ind = spec.input("indicators").columns
        helpers = [
            "\n# Track half-width in the observation's units (METHOD.md).\nHALF_WIDTH = 0.2",
            _CAR_METRIC,
        ]
        call = f"_run('metric.car_racing', _metric_car, {_quote(tiles[0])}, {_quote(ind[0])})"
        return features, helpers, call
    if spec.name == "door_open" and "features" in names:
        cols = spec.input("features").columns
        gripper, handle, target = cols[0:3], cols[4:7], cols[36:39]
        helpers = [
            "\n# Gripper within this distance (m) of the handle counts as at the handle.\nNEAR_HANDLE = 0.05",
            _DOOR_METRIC,
        ]
        call = (
            f"_run('metric.door_open', _metric_door, {list(gripper)!r}, {list(handle)!r}, "
            f"{list(target)!r})"
        )
        return features, helpers, call
    return features, [], "_run('metric.generic', _metric_generic)"


def _registered_features(spec: TaskSpec) -> dict[str, str]:
    """The task's own hot-spot features (`Task.diagnostic_features`) when `spec` is the spec
    of a registered task (same observation columns), else none."""
    from refine_core.tasks.registry import UnknownTaskError, get_task

    try:
        task = get_task(spec.name)
    except UnknownTaskError:
        return {}
    if task.spec.observation_columns != spec.observation_columns:
        return {}
    return task.diagnostic_features()


def diagnostic_battery(spec: TaskSpec, program: str, schema: list[str]) -> str:
    """Analysis code for `program`'s rollout table with columns `schema`.

    Only the program text, the task spec and the column names are read; no rollout values.
    Checks whose columns are absent from `schema` are not generated at all; checks that meet a
    missing column at run time print a SKIP line.
    """
    columns = [str(c) for c in schema]
    present = set(columns)
    facts = read_program(program or "", spec)
    weights = [c for c in columns if c.startswith("weight_")]
    latents = [c for c in columns if c.startswith("latent_")]
    observations = [c for c in spec.observation_columns if c in present]
    actions = [(a.name, float(a.low), float(a.high)) for a in spec.actions]
    features, helpers, metric_call = _task_features(spec)

    lines = [
        "# Diagnostic battery written by the offline (rule-based) analyst from the program and",
        f"# the column schema of task {spec.name!r}; it reads `df` (rollout) and `demo`.",
        _PRELUDE,
        *helpers,
        "",
        "",
        "# Observation columns present in the table (searched for disagreement correlates).",
        f"OBSERVATIONS = {observations!r}",
        "",
        "# --- what the table holds and how the task went",
        "_run('table', _table_check)",
        metric_call,
        "",
        "# --- fitted weights against the sign their author expected",
    ]
    for key in weights:
        if key in facts.initial:
            lines.append(f"_run({_quote('sign.' + key)}, _sign_check, {_quote(key)}, {facts.initial[key]!r})")
    lines.append("")
    lines.append("# --- latents recomputed from their declared inputs")
    for key in latents:
        expr = facts.reconstructions.get(key)
        if expr is not None:
            lines.append(f"_run({_quote('recon.' + key)}, _recon_check, {_quote(key)}, lambda: {expr})")
    lines.append("")
    lines.append("# --- actions: saturation, agreement with the expert on the policy's own states")
    for name, low, high in actions:
        if f"act_{name}" in present and f"mean_{name}" in present:
            lines.append(f"_run({_quote('saturation.' + name)}, _saturation_check, {_quote(name)}, {low!r}, {high!r})")
        if f"mean_{name}" in present:
            lines.append(f"_run({_quote('temporal.' + name)}, _temporal_check, {_quote(name)})")
        if f"expert_{name}" in present and f"mean_{name}" in present:
            lines.append(f"_run({_quote('expert.' + name)}, _expert_check, {_quote(name)}, {low!r}, {high!r})")
            for feature, expr in features.items():
                check = f"hotspot.{name}.{feature}"
                lines.append(
                    f"_run({_quote(check)}, _hotspot_check, {_quote(name)}, {low!r}, {high!r}, lambda: {expr})"
                )
            lines.append(
                f"_run({_quote('disagreement.' + name)}, _disagreement_check, {_quote(name)}, "
                f"{low!r}, {high!r}, OBSERVATIONS)"
            )
    lines.append("")
    lines.append("# --- latents against actions")
    for latent in latents:
        for name, _, _ in actions:
            if f"mean_{name}" in present:
                check = f"corr.{latent}.{name}"
                lines.append(f"_run({_quote(check)}, _corr_check, {_quote(latent)}, {_quote(name)})")
    lines.append("")
    lines.append("# --- rollout states against demonstration states")
    for column in observations:
        lines.append(f"_run({_quote('shift.' + column)}, _shift_check, {_quote(column)})")
    return "\n".join(lines) + "\n"
