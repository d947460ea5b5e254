"""The offline battery's own checks for the door: sandbox code, kept here so that ruff and the
tests see it (`refine_core/analyst/offline/battery_code.py` says how such a file is read and
sent); `diagnostics.py` writes the calls."""

import numpy as np

# ---- sandbox code begins ----

# Gripper within this distance (m) of the handle counts as at the handle.
NEAR_HANDLE = 0.05
# Horizontally this close (m) to the handle counts as aligned over it.
ALIGNED_XY = 0.04
# Higher than this (m) above the handle counts as hovering.
ABOVE = 0.02


def _distance(frame, a, b):
    return np.sqrt(sum((_col(frame, x) - _col(frame, y)) ** 2 for x, y in zip(a, b, strict=True)))


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
          gap=float(np.mean(mins)) - demo_min, initial=float(np.mean(initial)),
          final=float(np.mean(final)), decrease_frac=float(np.mean(decrease)),
          min_gripper_handle=float(np.mean(grip_min)), near_frac=float(np.mean(near)))


def _contact_step(frame, gripper, handle):
    reach = _distance(frame, gripper, handle)
    hits = np.flatnonzero(reach < NEAR_HANDLE)
    return int(hits[0]) if len(hits) else len(frame)


def _approach_facts(frame, gripper, handle):
    """(first step at the handle, steps spent aligned above it before that)."""
    contact = _contact_step(frame, gripper, handle)
    flat = _distance(frame, gripper[:2], handle[:2])
    above = _col(frame, gripper[2]) - _col(frame, handle[2])
    waiting = (flat < ALIGNED_XY) & (above > ABOVE)
    return contact, int(np.sum(waiting[:contact]))


def _approach_check(check, gripper, handle):
    """How long the gripper takes to reach the handle and how long it waits above it once
    aligned, against the demonstration."""
    if demo is None:
        raise _Missing("demo")
    roll = [_approach_facts(g, gripper, handle) for g in _groups(df)]
    d_contact, d_wait = _approach_facts(demo, gripper, handle)
    contact = float(np.mean([c for c, _ in roll]))
    wait = float(np.mean([w for _, w in roll]))
    ratio = contact / max(d_contact, 1)
    status = "FAIL" if wait - d_wait > 5 or ratio > 1.5 else "PASS"  # as the catalogue rule (offline_catalogue.py)
    _emit(check, status, contact_step=contact, demo_contact_step=d_contact, contact_ratio=ratio,
          wait_steps=wait, demo_wait_steps=d_wait, wait_excess=wait - d_wait)


def _pull_check(check, gripper, handle, target):
    """After first contact and until the door is as open as it gets: how often the gripper is
    off the handle, and how far the handle travels toward the target per step."""
    lost, rate = [], []
    for g in _groups(df):
        contact = _contact_step(g, gripper, handle)
        d = _distance(g, handle, target)
        done = int(np.nanargmin(d))
        if contact >= done:
            continue
        reach = _distance(g, gripper, handle)[contact:done]
        lost.append(float(np.mean(reach > 2 * NEAR_HANDLE)))
        rate.append((float(d[contact]) - float(d[done])) / max(done - contact, 1))
    if not lost:
        _emit(check, "FAIL", engaged_episodes=0, lost_frac=1.0)
        return
    d = _distance(demo, handle, target) if demo is not None else None
    demo_rate = float("nan")
    if d is not None:
        contact, done = _contact_step(demo, gripper, handle), int(np.nanargmin(d))
        if contact < done:
            demo_rate = (float(d[contact]) - float(d[done])) / max(done - contact, 1)
    _emit(check, "FAIL" if float(np.mean(lost)) > 0.2 else "PASS", engaged_episodes=len(lost),
          lost_frac=float(np.mean(lost)), close_rate=float(np.mean(rate)), demo_close_rate=demo_rate)
# ---- sandbox code ends ----
# Stand-ins (never sent): the tables and the battery's helpers.
df = demo = _emit = _col = _groups = _on = None
_Missing = Exception
