"""The action distribution outside the module: batching inputs, sampling, clipping, likelihood.

The contract keeps sampling out of the program (METHOD.md): a program returns the Gaussian's
mean and Cholesky factor, and everything random or bounded happens here, the same way for
imitation learning, rollouts and RL.

NaN in the inputs is passed through unchanged by `to_batch`. The contract makes NaN handling the
program's job, and replacing NaN here would hide from the program (and from the diagnostics)
that an observation was missing.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch.distributions import MultivariateNormal

from refine_core.policy.errors import InputBatchError
from refine_core.tasks.spec import TaskSpec


def to_batch(
    spec: TaskSpec, inputs: Mapping[str, np.ndarray], batched: bool = True
) -> dict[str, torch.Tensor]:
    """Float32 tensors keyed and ordered like `spec.inputs`.

    `batched=False` takes one observation per input (shape `spec` shape) and adds the batch axis.
    Keys not in the spec are ignored, so a demonstration may carry extra arrays.
    """
    missing = [inp.name for inp in spec.inputs if inp.name not in inputs]
    if missing:
        raise InputBatchError(
            f"task {spec.name}: inputs {missing} missing; expected {[i.name for i in spec.inputs]}, "
            f"got {sorted(inputs)}"
        )
    batch: dict[str, torch.Tensor] = {}
    length = None
    for inp in spec.inputs:
        try:
            # Always a copy: callers' arrays may be read-only views and torch needs writable memory.
            array = np.array(inputs[inp.name], dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InputBatchError(f"input {inp.name!r} is not numeric: {exc}") from None
        if not batched:
            array = array[None]
        if array.ndim == 0 or array.shape[1:] != tuple(inp.shape):
            dims = ", ".join(map(str, inp.shape))
            expected = f"(B, {dims})" if batched else f"({dims},)" if len(inp.shape) == 1 else f"({dims})"
            got = array.shape if batched else array.shape[1:]
            raise InputBatchError(
                f"input {inp.name!r} must have shape {expected}, got {tuple(got)}"
            )
        if length is not None and array.shape[0] != length:
            raise InputBatchError(
                f"inputs disagree on the batch size: {inp.name!r} has {array.shape[0]}, "
                f"earlier inputs have {length}"
            )
        length = array.shape[0]
        batch[inp.name] = torch.from_numpy(array)
    return batch


def action_distribution(mean: torch.Tensor, scale_tril: torch.Tensor) -> MultivariateNormal:
    """The policy's Gaussian. Argument validation is off: `validate_policy` already checked the
    factor, and torch's check costs a Cholesky per call."""
    return MultivariateNormal(mean, scale_tril=scale_tril, validate_args=False)


def sample_actions(
    mean: torch.Tensor, scale_tril: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Unclipped samples `mean + L @ eps`; an explicit generator makes rollouts reproducible
    (torch's `MultivariateNormal.sample` draws from the global RNG only)."""
    with torch.no_grad():
        eps = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device=mean.device)
        return mean + (scale_tril @ eps.unsqueeze(-1)).squeeze(-1)


def clip_actions(actions, spec: TaskSpec):
    """Clip to the task's action bounds; numpy in, numpy out; tensor in, tensor out."""
    low, high = spec.action_low, spec.action_high
    if isinstance(actions, torch.Tensor):
        return torch.clamp(
            actions,
            torch.as_tensor(low, dtype=actions.dtype, device=actions.device),
            torch.as_tensor(high, dtype=actions.dtype, device=actions.device),
        )
    return np.clip(np.asarray(actions), low, high)


def log_prob(mean: torch.Tensor, scale_tril: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Per-row log-density of `actions` (B, A) under the policy's Gaussian, shape (B,)."""
    return action_distribution(mean, scale_tril).log_prob(actions)
