"""Imitation learning: fit a program's free coefficients to one demonstration by NLL.

The loss is the negative log-likelihood of the demonstrated actions under the program's own
Gaussian (METHOD.md), so the fit shapes both the mean and the scale. A seeded random 20 % of
steps is held out; the best-validation weights are restored at the end, which is what keeps a
flexible program (or the MLP) from memorising a single episode. Everything is seeded and runs
on the CPU, so the same program, data and config give bit-identical weights.
"""

from __future__ import annotations

import copy
import math
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from refine_core.learn.adam import Adam
from refine_core.policy.contract import policy_forward
from refine_core.policy.distribution import log_prob, to_batch
from refine_core.tasks.spec import TaskSpec


class FitError(RuntimeError):
    """The fit could not proceed (bad data, forward failure, non-finite loss). The message is
    written to go back to the program author as is."""

    def __init__(self, message: str, epoch: int | None = None) -> None:
        super().__init__(message)
        self.epoch = epoch


@dataclass
class ILConfig:
    lr: float = 1e-2
    """Adam learning rate. Structured programs have few, well-scaled coefficients, so a large
    rate converges in a few hundred full-batch steps."""
    max_epochs: int = 1000
    """Upper bound on passes over the training split (one Adam step per pass when full-batch)."""
    patience: int = 100
    """Stop after this many epochs without a validation improvement larger than `min_delta`."""
    min_delta: float = 1e-4
    """Smallest decrease of the validation NLL that counts as an improvement."""
    val_fraction: float = 0.2
    """Share of demonstration steps held out (seeded random split, at least one step each)."""
    seed: int = 0
    """Seeds the split, minibatch order and any randomness inside the program."""
    weight_decay: float = 0.0
    """Adam L2 penalty; zero keeps interpretable coefficients at their fitted values."""
    batch_size: int | None = None
    """Minibatch size; None means full-batch (deterministic and fast at demonstration scale)."""
    grad_clip: float | None = None
    """Clip the gradient norm to this value; None disables clipping."""
    num_threads: int | None = 1
    """Torch intra-op threads during the fit (restored afterwards). At demonstration scale the
    thread hand-off costs more than it saves (measured ~7x slower with 2 threads on a busy
    2-core machine), and one thread keeps results independent of the core count. None leaves
    torch's setting alone."""
    progress: bool | None = None
    """Show a progress bar; None shows it only on a terminal."""

    def __post_init__(self) -> None:
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.max_epochs < 1 or self.patience < 1:
            raise ValueError("max_epochs and patience must be >= 1")
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.num_threads is not None and self.num_threads < 1:
            raise ValueError(f"num_threads must be >= 1 or None, got {self.num_threads}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1 or None, got {self.batch_size}")


@dataclass
class FitReport:
    train_nll: list[float]
    """Mean training NLL per epoch (after that epoch's updates)."""
    val_nll: list[float]
    """Mean validation NLL per epoch (after that epoch's updates)."""
    epochs: int
    """Epochs run (early stopping may end before `max_epochs`)."""
    best_epoch: int
    """Epoch whose weights were restored; 0 means the initial weights were never beaten."""
    best_val_nll: float
    initial_train_nll: float
    initial_val_nll: float
    n_train: int
    n_val: int
    stopped_early: bool
    wall_time_s: float
    weights: dict[str, np.ndarray] = field(repr=False)
    """The restored state dict (parameters and buffers) as plain arrays."""

    def to_dict(self) -> dict:
        """JSON-safe summary without the weights."""
        data = asdict(self)
        data.pop("weights")
        return data


def fit_il(
    policy: nn.Module,
    inputs: Mapping[str, np.ndarray],
    actions: np.ndarray,
    config: ILConfig | None = None,
    *,
    spec: TaskSpec | None = None,
    after_epoch: Callable[[int, float], None] | None = None,
) -> FitReport:
    """Fit `policy` in place to (inputs, actions) and return the report.

    `inputs` maps each forward argument to a (T, ...) array; they are passed positionally in
    `spec.inputs` order when `spec` is given (which also checks shapes), else in mapping order.
    A policy with `set_input_stats(mean, std)` first receives per-coordinate statistics of the
    flattened, concatenated training inputs (NaN ignored; near-constant coordinates get std 1).
    `after_epoch(epoch, seconds)` hears about every finished epoch with the seconds since the
    fit started (the sandbox's validation phase ends after the first); an exception it raises
    ends the fit.
    """
    config = config or ILConfig()
    start = time.perf_counter()
    batch, target = _prepare(inputs, actions, spec)
    steps = target.shape[0]
    train_idx, val_idx = _split(steps, config.val_fraction, config.seed)
    train = {k: v[train_idx] for k, v in batch.items()}
    val = {k: v[val_idx] for k, v in batch.items()}
    y_train, y_val = target[train_idx], target[val_idx]

    was_training = policy.training
    threads = torch.get_num_threads()
    if config.num_threads is not None:
        torch.set_num_threads(config.num_threads)
    try:
        policy.train()
        report = _fit(policy, train, y_train, val, y_val, config,
                      after_epoch and (lambda epoch: after_epoch(epoch, time.perf_counter() - start)))
    finally:
        torch.set_num_threads(threads)
        policy.train(was_training)
    report.n_train, report.n_val = len(train_idx), len(val_idx)
    report.wall_time_s = time.perf_counter() - start
    return report


def _fit(policy, train, y_train, val, y_val, config: ILConfig,
         after_epoch: Callable[[int], None] | None = None) -> FitReport:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        if callable(getattr(policy, "set_input_stats", None)):
            mean, std = _input_stats(train)
            try:
                with torch.no_grad():
                    policy.set_input_stats(mean, std)
            except Exception as exc:
                raise FitError(
                    f"set_input_stats(mean, std) with {tuple(mean.shape)} statistics of the "
                    f"flattened inputs raised {type(exc).__name__}: {exc}"
                ) from None
        params = [p for p in policy.parameters() if p.requires_grad]
        if not params:
            raise FitError("the policy has no trainable parameters")
        optimizer = Adam(params, lr=config.lr, weight_decay=config.weight_decay)
        order = torch.Generator().manual_seed(config.seed)

        initial_train = _nll(policy, train, y_train, epoch=0)
        best_val = initial_val = _nll(policy, val, y_val, epoch=0)
        best_state = _snapshot(policy)
        best_epoch, since_best = 0, 0
        train_curve: list[float] = []
        val_curve: list[float] = []
        stopped_early = False
        bar = tqdm(range(1, config.max_epochs + 1), desc="IL fit", unit="epoch",
                   disable=_progress_disabled(config), leave=False)
        for epoch in bar:
            for idx in _minibatches(len(y_train), config.batch_size, order):
                sub = train if idx is None else {k: v[idx] for k, v in train.items()}
                y = y_train if idx is None else y_train[idx]
                optimizer.zero_grad()
                loss = _nll_tensor(policy, sub, y, epoch)
                loss.backward()
                if config.grad_clip is not None:
                    nn.utils.clip_grad_norm_(params, config.grad_clip)
                optimizer.step()
            train_nll = _nll(policy, train, y_train, epoch)
            val_nll = _nll(policy, val, y_val, epoch)
            train_curve.append(train_nll)
            val_curve.append(val_nll)
            if val_nll < best_val - config.min_delta:
                best_val, best_epoch, since_best = val_nll, epoch, 0
                best_state = _snapshot(policy)
            else:
                since_best += 1
            bar.set_postfix(train=f"{train_nll:.3f}", val=f"{val_nll:.3f}", refresh=False)
            if after_epoch is not None:
                after_epoch(epoch)
            if since_best >= config.patience:
                stopped_early = True
                break
        bar.close()
    policy.load_state_dict(best_state)
    return FitReport(
        train_nll=train_curve,
        val_nll=val_curve,
        epochs=len(train_curve),
        best_epoch=best_epoch,
        best_val_nll=best_val,
        initial_train_nll=initial_train,
        initial_val_nll=initial_val,
        n_train=len(y_train),
        n_val=len(y_val),
        stopped_early=stopped_early,
        wall_time_s=0.0,
        weights={k: v.detach().cpu().numpy().copy() for k, v in policy.state_dict().items()},
    )


def _snapshot(policy) -> dict:
    """The weights as they are now. A fit improves on most of its epochs, so this runs up to a
    thousand times: cloning the tensors took a seventh of `copy.deepcopy`'s time (0.03 ms
    against 0.21 ms for the door starter's twelve weights; deepcopy walks each tensor's Python
    state), and anything that is not a tensor is still deep-copied."""
    return {k: v.detach().clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v)
            for k, v in policy.state_dict().items()}


def _prepare(inputs, actions, spec):
    if spec is not None:
        try:
            batch = to_batch(spec, inputs)
        except ValueError as exc:
            raise FitError(f"demonstration inputs do not match the task: {exc}") from None
    else:
        if not inputs:
            raise FitError("no demonstration inputs given")
        try:
            batch = {k: torch.from_numpy(np.array(v, dtype=np.float32))
                     for k, v in inputs.items()}
        except (TypeError, ValueError) as exc:
            raise FitError(f"demonstration inputs are not numeric arrays: {exc}") from None
    try:
        target = np.array(actions, dtype=np.float32)  # a copy: torch needs writable memory
    except (TypeError, ValueError) as exc:
        raise FitError(f"demonstration actions are not a numeric array: {exc}") from None
    if target.ndim != 2:
        raise FitError(f"demonstration actions must have shape (T, A), got {target.shape}")
    if not np.isfinite(target).all():
        raise FitError("demonstration actions contain NaN or infinity")
    lengths = {k: v.shape[0] if v.ndim else 0 for k, v in batch.items()}
    if set(lengths.values()) != {target.shape[0]}:
        raise FitError(f"inputs and actions disagree on the number of steps: {lengths}, "
                       f"actions {target.shape[0]}")
    if target.shape[0] < 2:
        raise FitError(f"need at least 2 demonstration steps to hold one out, got {target.shape[0]}")
    return batch, torch.from_numpy(target)


def _split(steps: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    n_val = min(steps - 1, max(1, round(fraction * steps)))
    perm = np.random.default_rng(seed).permutation(steps)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def _input_stats(train: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    flat = torch.cat([v.reshape(v.shape[0], -1) for v in train.values()], dim=1).double().numpy()
    finite = np.isfinite(flat)
    safe = np.where(finite, flat, 0.0)
    count = np.maximum(finite.sum(axis=0), 1)
    mean = safe.sum(axis=0) / count
    var = (np.where(finite, flat - mean, 0.0) ** 2).sum(axis=0) / count
    std = np.sqrt(var)
    std = np.where(std < 1e-6, 1.0, std)
    return torch.from_numpy(mean.astype(np.float32)), torch.from_numpy(std.astype(np.float32))


def _minibatches(n: int, size: int | None, generator: torch.Generator):
    if size is None or size >= n:
        yield None
        return
    perm = torch.randperm(n, generator=generator)
    for i in range(0, n, size):
        yield perm[i:i + size]


def _nll_tensor(policy: nn.Module, batch, target: torch.Tensor, epoch: int) -> torch.Tensor:
    try:
        mean, tril, _ = policy_forward(policy, batch, grad=torch.is_grad_enabled())
        loss = -log_prob(mean, tril, target).mean()
    except Exception as exc:
        tail = "\n".join(traceback.format_exception(exc)[-3:]).strip()
        raise FitError(
            f"forward/log-likelihood failed at epoch {epoch} on demonstration data: "
            f"{type(exc).__name__}: {exc}\n{tail}", epoch
        ) from None
    if not bool(torch.isfinite(loss)):
        bad_mean = not bool(torch.isfinite(mean).all())
        hint = ("action_mean is non-finite on some demonstration steps (NaN inputs not handled?)"
                if bad_mean else "scale_tril collapsed or exploded (bound the std away from 0)")
        raise FitError(f"non-finite NLL at epoch {epoch}: {hint}", epoch)
    return loss


def _nll(policy: nn.Module, batch, target, epoch: int) -> float:
    with torch.no_grad():
        return float(_nll_tensor(policy, batch, target, epoch))


def _progress_disabled(config: ILConfig) -> bool | None:
    if config.progress is None:
        return None
    return not config.progress
