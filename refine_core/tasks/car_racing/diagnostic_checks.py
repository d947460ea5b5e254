"""The offline battery's own checks for the car: sandbox code, kept here so that ruff and the
tests see it (`refine_core/analyst/offline/battery_code.py` says how such a file is read and
sent); `diagnostics.py` writes the calls."""

import math

import numpy as np

# ---- sandbox code begins ----

# Track half-width in the observation's units.
HALF_WIDTH = 0.2
# A bend ahead: some tile 4-11 turned this much (rad) from the car's heading.
BEND_RAD = 0.4
# Steering this hard (|steer|) is a bend, where gas costs grip.
STEER_HARD = 0.3
# Rear wheels this much faster than the car (speed units) are spinning.
SPIN = 0.1


def _on_track(frame, offset):
    return np.abs(np.nan_to_num(_col(frame, offset))) <= HALF_WIDTH


def _bend_speed_check(check, offset, speed, bend):
    """Speed on the track where the road ahead bends, rollout against demonstration: a car
    that is faster there than the demonstration was is asking for more grip than it has."""
    out = {}
    for label, frame in (("roll", df), ("demo", demo)):
        if frame is None:
            raise _Missing("demo")
        sel = _on_track(frame, offset) & (_on(frame, bend) > BEND_RAD)
        out[label] = float(np.mean(_col(frame, speed)[sel])) if sel.any() else float("nan")
        out[label + "_rows"] = int(sel.sum())
    ratio = out["roll"] / out["demo"] if out["demo"] and math.isfinite(out["demo"]) else float("nan")
    status = "FAIL" if ratio > 1.15 else "PASS" if math.isfinite(ratio) else "INFO"
    _emit(check, status, roll_speed=out["roll"], demo_speed=out["demo"], ratio=ratio,
          roll_rows=out["roll_rows"], demo_rows=out["demo_rows"])


def _traction_check(check, speed, rear, steer, gas):
    """Wheel spin and gas under hard steering, rollout against demonstration: a rear-wheel
    drive car that keeps the gas on while steering hard spins its rear wheels and slides."""
    out = {}
    for label, frame in (("roll", df), ("demo", demo)):
        if frame is None:
            raise _Missing("demo")
        spin = 0.5 * (_col(frame, rear[0]) + _col(frame, rear[1])) - _col(frame, speed)
        hard = np.abs(np.nan_to_num(_col(frame, steer))) > STEER_HARD
        out[label + "_spin_frac"] = float(np.mean(spin > SPIN))
        out[label + "_gas_hard"] = float(np.mean(_col(frame, gas)[hard])) if hard.any() else 0.0
        out[label + "_hard_frac"] = float(np.mean(hard))
    spin_excess = out["roll_spin_frac"] - out["demo_spin_frac"]
    gas_excess = out["roll_gas_hard"] - out["demo_gas_hard"]
    status = "FAIL" if spin_excess > 0.2 or gas_excess > 0.3 else "PASS"
    _emit(check, status, spin_excess=spin_excess, gas_hard_excess=gas_excess, **out)


def _offtrack_check(check, offset):
    """How often the car leaves the track, per 1000 steps, against the demonstration."""
    rates = {}
    for label, frame in (("roll", df), ("demo", demo)):
        if frame is None:
            raise _Missing("demo")
        entries, steps = 0, 0
        for g in _groups(frame) if label == "roll" else [frame]:
            off = ~_on_track(g, offset)
            entries += int(np.sum(off[1:] & ~off[:-1]) + (1 if len(off) and off[0] else 0))
            steps += len(g)
        rates[label] = 1000.0 * entries / max(steps, 1)
    ratio = rates["roll"] / max(rates["demo"], 1.0)
    _emit(check, "FAIL" if ratio > 3.0 else "PASS", roll_per_1000=rates["roll"],
          demo_per_1000=rates["demo"], ratio=ratio)


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
# ---- sandbox code ends ----
# Stand-ins (never sent): the tables and the battery's helpers.
df = demo = _emit = _col = _groups = _on = None
_Missing = Exception
