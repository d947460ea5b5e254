"""Meta-World's scripted door-open policy as this task's expert.

Why Meta-World's own policy: it is the reference demonstrator of door-open-v3 and opens most
doors; only its action space needs translating (our gripper command is 1 = open).
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from refine_core.tasks.door_open.env import gripper_command


class DoorExpert:
    """Meta-World's scripted door-open policy, translated to this env's action space."""

    def __init__(self, env: gym.Env | None = None) -> None:
        from metaworld.policies.sawyer_door_open_v3_policy import SawyerDoorOpenV3Policy

        # Meta-World's scripted policies warn on every step whose gains saturate the action;
        # the expert labels every rollout step, so that warning would drown the output. Its
        # clipping is expected. (Installed here, when an expert exists, and idempotent.)
        warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high", module="metaworld")

        self._policy = SawyerDoorOpenV3Policy()

    def __call__(self, obs: Any) -> np.ndarray:
        # the policy edits its observation in place, so it gets a copy
        raw = np.asarray(self._policy.get_action(np.array(obs, dtype=np.float64)), dtype=np.float64)
        return np.array([*np.clip(raw[:3], -1.0, 1.0), gripper_command(raw[3])], dtype=np.float32)
