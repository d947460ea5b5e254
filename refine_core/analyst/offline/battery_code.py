"""The offline battery's helpers and generic checks: code that runs in the sandbox.

This file is never imported by the battery: `battery.py` reads the lines between the two
marker lines below as text and puts them at the top of every diagnostic script it writes,
where `df` (the rollout table) and `demo` (the demonstration) are already loaded. Below the
second marker, stand-ins for those names make the file a module that ruff checks and tests
load (`test/test_battery_code.py` calls its checks on real tables).

Each check prints one line, ``CHECK <id> <PASS|FAIL|INFO|SKIP|ERROR> key=value ...``, through
`_emit`, and runs inside `_run`'s guard, so a missing column or a NaN makes that one line SKIP
or ERROR instead of ending the script.
"""

# ---- sandbox code begins ----
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


_FRAME = [None]


def C(name):
    """A column as the program sees it (NaN replaced by zero, like nan_to_num), read from the
    rollout unless `_on` points it at another frame."""
    return np.nan_to_num(_col(df if _FRAME[0] is None else _FRAME[0], name))


def _on(frame, fn):
    """Evaluate `fn` (an expression over C) on the rows of `frame`."""
    if frame is None:
        raise _Missing("demo")
    _FRAME[0] = frame
    try:
        return np.asarray(fn(), dtype=float) * np.ones(len(frame))
    finally:
        _FRAME[0] = None


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


def _column(family, action):
    """The table's column of `action` in `family` (mean, act, expert), as the battery was told
    it is named (`COLUMNS`, written from the rollout schema)."""
    return COLUMNS[family][action]


def _clipped_mean(action, low, high):
    return np.clip(_col(df, _column("mean", action)), low, high)


def _table_check(check):
    episodes = len(_groups(df))
    _emit(check, "INFO", rows=len(df), episodes=episodes, columns=len(df.columns),
          demo_rows=0 if demo is None else len(demo), expert=len(EXPERT))


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
    act = _col(df, _column("act", action))
    mean = _col(df, _column("mean", action))
    span = (high - low) * 1e-3
    at_low = float(np.mean(act <= low + span))
    at_high = float(np.mean(act >= high - span))
    outside = float(np.mean((mean < low) | (mean > high)))
    values = dict(low=at_low, high=at_high, mean_outside=outside)
    status = "INFO"
    if demo is not None and _column("act", action) in demo.columns:
        shown = _col(demo, _column("act", action))
        d_low = float(np.mean(shown <= low + span))
        d_high = float(np.mean(shown >= high - span))
        values.update(demo_low=d_low, demo_high=d_high)
        status = "FAIL" if max(abs(at_low - d_low), abs(at_high - d_high)) > 0.3 else "PASS"
    if action in EXPERT:
        expert = _col(df, _column("expert", action))
        values.update(expert_low=float(np.mean(expert <= low + span)),
                      expert_high=float(np.mean(expert >= high - span)))
    _emit(check, status, **values)


def _corr_check(check, latent, action):
    lat = _col(df, latent)
    values = dict(r=_corr(lat, _col(df, _column("mean", action))))
    if action in EXPERT:
        values["r_expert"] = _corr(lat, _col(df, _column("expert", action)))
    _emit(check, "INFO", **values)


def _demofit_check(check, action, features):
    """How much of the demonstrated action the program's own features explain linearly
    (least squares with a bias on the demonstration's states), next to the same fit of the
    policy's action mean on the rollout's states."""
    names = sorted(features)
    if not names:
        raise _Missing("features")
    shown = _col(demo, _column("act", action)) if demo is not None else None
    if shown is None:
        raise _Missing("demo")

    def r2(frame, target):
        x = np.column_stack([_on(frame, features[n]) for n in names] + [np.ones(len(frame))])
        ok = np.all(np.isfinite(x), axis=1) & np.isfinite(target)
        if ok.sum() <= x.shape[1] or np.std(target[ok]) < 1e-12:
            return float("nan")
        coef, *_ = np.linalg.lstsq(x[ok], target[ok], rcond=None)
        resid = target[ok] - x[ok] @ coef
        return 1.0 - float(np.var(resid)) / float(np.var(target[ok]))

    _emit(check, "INFO", r2_demo=r2(demo, shown), r2_policy=r2(df, _col(df, _column("mean", action))),
          features=len(names))


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
    expert = _col(df, _column("expert", action))
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
    err = _col(df, _column("expert", action)) - _clipped_mean(action, low, high)
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
    err = _col(df, _column("expert", action)) - _clipped_mean(action, low, high)
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
    """Sign changes of the action's increments per step (oscillation), against the
    demonstration's (and the expert relabels' when present)."""
    flips, expert_flips, jumps = [], [], []
    for g in _groups(df):
        mean = _col(g, _column("mean", action))
        flips.append(_flips(mean))
        jumps.append(float(np.nanmean(np.abs(np.diff(mean)))) if len(mean) > 1 else float("nan"))
        if action in EXPERT:
            expert_flips.append(_flips(_col(g, _column("expert", action))))
    flip = float(np.nanmean(flips)) if flips else float("nan")
    values = dict(flip_rate=flip)
    if demo is not None and _column("act", action) in demo.columns:
        demo_flip = _flips(_col(demo, _column("act", action)))
        values.update(demo_flip_rate=demo_flip,
                      flip_ratio=flip / demo_flip if demo_flip and math.isfinite(demo_flip) else float("nan"))
    if expert_flips:
        expert_flip = float(np.nanmean(expert_flips))
        values.update(expert_flip_rate=expert_flip,
                      expert_flip_ratio=flip / expert_flip if expert_flip and math.isfinite(expert_flip) else float("nan"))
    _emit(check, "INFO", **values,
          mean_abs_step=float(np.nanmean(jumps)) if jumps else float("nan"))


def _metric_generic(check):
    returns = [float(np.nansum(_col(g, "reward"))) for g in _groups(df)]
    _emit(check, "INFO", mean_return=float(np.mean(returns)), min_return=float(np.min(returns)),
          episodes=len(returns))
# ---- sandbox code ends ----
# Stand-ins (never sent): the script loads `df` and `demo` before this code, and the battery
# sets `EXPERT` (the actions with expert relabels in the table) and `COLUMNS` (each action's
# column per family) after it.
df = demo = None
EXPERT: set = set()
COLUMNS: dict = {}
