"""Loading and validating structured-policy programs (the contract of METHOD.md).

A program is untrusted source text. It is statically checked, executed in a fresh module
namespace, constructed without arguments and probed with a realistic dummy batch; every rule it
breaks becomes its own `ContractError` subclass. Validation runs at the batch size the fit uses
and at batch size 1 (what a rollout uses), so a program that only works for one of them is caught
before it reaches a simulator or a robot.
"""

from __future__ import annotations

import hashlib
import linecache
import re
import traceback
import types
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from refine_core.policy.errors import (
    ActionShapeError,
    ConstructionError,
    ContractError,
    ForwardError,
    InfoKeyError,
    InfoShapeError,
    MissingClassError,
    NonFiniteOutputError,
    NoParametersError,
    OutputStructureError,
    ProgramImportError,
    ProgramSyntaxError,
    ScaleTrilDiagonalError,
    ScaleTrilNotLowerTriangularError,
    ScaleTrilShapeError,
)
from refine_core.policy.static_check import check_program_source
from refine_core.rollout.schema import INFO_PREFIXES, is_weight
from refine_core.tasks.spec import TaskSpec

INFO_KEY_RE = re.compile("^(" + "|".join(re.escape(p) for p in INFO_PREFIXES) + ")[a-z0-9_]+$")
# Entries above the diagonal smaller than this count as zero: programs that build the factor
# with arithmetic (e.g. `L * mask`) can leave signed zeros or denormals there.
_UPPER_TOL = 1e-7
_TRACEBACK_LINES = 12


@dataclass(frozen=True)
class InfoSchema:
    """The info keys a validated program emits, whole (e.g. ``"latent_speed_error"``), in the
    order the program returns them; they become rollout-table columns. `warnings` are findings
    that do not break the contract but that the author should hear about (e.g. NaN inputs
    produce NaN actions)."""

    weights: tuple[str, ...]
    latents: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        return self.weights + self.latents


def _program_filename(source: str, spec: TaskSpec) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]
    return f"<policy {spec.policy_class} {digest}>"


def load_policy_class(source: str, spec: TaskSpec, *, static_check: bool = True) -> type[nn.Module]:
    """Compile and execute `source` in a fresh module and return its policy class.

    The class named `spec.policy_class` wins; if it is absent but the program defines exactly
    one `nn.Module` subclass, that one is used, so programs written for another class name
    load unchanged. `static_check=False` is only for callers that already ran the check.
    """
    if not isinstance(source, str):
        raise ProgramSyntaxError(f"program source must be text, got {type(source).__name__}")
    if static_check:
        check_program_source(source)
    filename = _program_filename(source, spec)
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise ProgramSyntaxError(f"{exc.msg}: {(exc.text or '').strip()!r}", exc.lineno) from None
    except ValueError as exc:  # e.g. null bytes in the source
        raise ProgramSyntaxError(str(exc)) from None
    # Registering the text lets tracebacks from inside forward() show the program's lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    module = types.ModuleType(f"refine_policy_{filename.split()[-1].rstrip('>')}")
    module.__file__ = filename
    try:
        exec(code, module.__dict__)  # noqa: S102 - the program was statically checked above
    except Exception as exc:
        raise ProgramImportError(
            f"running the program's top level raised {type(exc).__name__}: {exc}\n"
            + _traceback_tail(exc)
        ) from None

    defined = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, nn.Module) and obj.__module__ == module.__name__
    ]
    wanted = getattr(module, spec.policy_class, None)
    if isinstance(wanted, type) and issubclass(wanted, nn.Module):
        return wanted
    names = tuple(cls.__name__ for cls in defined)
    if len(defined) == 1:
        return defined[0]
    if not defined:
        raise MissingClassError(
            f"no torch.nn.Module subclass found; define `class {spec.policy_class}(nn.Module)`",
            names,
        )
    raise MissingClassError(
        f"class {spec.policy_class!r} not found and the program defines several nn.Module "
        f"classes {list(names)}; name the policy class {spec.policy_class!r}",
        names,
    )


def build_policy(
    source: str, spec: TaskSpec, *, static_check: bool = True, seed: int = 0
) -> nn.Module:
    """Load, construct (without arguments) and validate a program.

    Construction runs under a fixed torch seed so that programs with random initialisation
    (the MLP baseline) build identically every time, which the fit's determinism relies on.
    """
    cls = load_policy_class(source, spec, static_check=static_check)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            module = cls()
        except TypeError as exc:
            raise ConstructionError(
                f"{cls.__name__}() must be constructible without arguments: {exc}"
            ) from None
        except Exception as exc:
            raise ConstructionError(
                f"{cls.__name__}() raised {type(exc).__name__}: {exc}\n" + _traceback_tail(exc)
            ) from None
    validate_policy(module, spec)
    return module


def dummy_batch(spec: TaskSpec, n: int, *, seed: int = 0) -> dict[str, torch.Tensor]:
    """A deterministic batch of `n` plausible inputs, keyed and ordered like `spec.inputs`.

    Values are uniform within a per-column range: `spec.extra["column_ranges"]` (column name
    -> (low, high)) where the task provides one, otherwise a guess from the column name (flags
    0/1, speeds non-negative, everything else in [-0.5, 0.5]). Non-zero, varied values keep
    programs that divide by a distance or a norm out of trouble that real data would not cause.
    """
    if n < 1:
        raise ValueError(f"dummy batch size must be >= 1, got {n}")
    ranges: Mapping[str, tuple[float, float]] = spec.extra.get("column_ranges", {}) or {}
    rng = np.random.default_rng(seed)
    batch: dict[str, torch.Tensor] = {}
    for inp in spec.inputs:
        lows, highs = zip(*(_column_range(col, ranges) for col in inp.columns), strict=True)
        low = np.asarray(lows, dtype=np.float64)
        high = np.asarray(highs, dtype=np.float64)
        values = low + (high - low) * rng.random((n, len(inp.columns)))
        flags = np.array([_is_flag(col) and col not in ranges for col in inp.columns])
        values[:, flags] = np.round(values[:, flags])
        batch[inp.name] = torch.from_numpy(values.astype(np.float32).reshape((n, *inp.shape)))
    return batch


def _is_flag(column: str) -> bool:
    lowered = column.lower()
    return any(word in lowered for word in ("border", "flag", "curb", "done", "success"))


def _column_range(column: str, ranges: Mapping[str, tuple[float, float]]) -> tuple[float, float]:
    if column in ranges:
        low, high = ranges[column]
        return float(low), float(high)
    lowered = column.lower()
    if _is_flag(column):
        return 0.0, 1.0
    if "speed" in lowered or "opening" in lowered:
        return 0.05, 0.8
    return -0.5, 0.5


def policy_forward(
    policy: nn.Module,
    batch: Mapping[str, torch.Tensor],
    spec: TaskSpec | None = None,
    *,
    grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Call `forward` with the batch's tensors as positional arguments.

    Arguments go in `spec.inputs` order when a spec is given, else in the mapping's order
    (`to_batch` and `dummy_batch` build mappings in spec order). Positional passing lets
    programs name their forward parameters as they like.
    """
    if spec is not None:
        args = [batch[inp.name] for inp in spec.inputs]
    else:
        args = list(batch.values())
    with torch.set_grad_enabled(grad):
        return policy(*args)


def validate_policy(module: nn.Module, spec: TaskSpec, batch_size: int = 5) -> InfoSchema:
    """Check every runtime rule of the contract; return the info schema or raise the rule's
    error. The program is probed at `batch_size` and at 1, and once with a NaN input (a
    non-finite result there is only a warning: the contract asks programs to handle NaN but
    the task decides whether NaNs ever occur)."""
    if not isinstance(module, nn.Module):
        raise ConstructionError(f"expected a torch.nn.Module instance, got {type(module).__name__}")
    trainable = [p for p in module.parameters() if p.requires_grad]
    if not trainable:
        raise NoParametersError(
            f"{type(module).__name__} has no trainable nn.Parameter; wrap each free coefficient "
            "in nn.Parameter(torch.tensor([...])) so imitation learning can fit it"
        )
    # Probing must not leave traces: programs may keep state in buffers (filters, running
    # statistics) that a dummy forward would otherwise overwrite.
    saved = {k: v.detach().clone() for k, v in module.state_dict().items()}
    try:
        return _validate(module, spec, batch_size)
    finally:
        with torch.no_grad():
            module.load_state_dict(saved)


def _validate(module: nn.Module, spec: TaskSpec, batch_size: int) -> InfoSchema:
    warnings: list[str] = []
    weights: tuple[str, ...] = ()
    latents: tuple[str, ...] = ()
    for n in dict.fromkeys((batch_size, 1)):
        batch = dummy_batch(spec, n)
        out = _call_forward(module, batch, spec, grad=(n == batch_size))
        weights, latents, mean, tril = _check_outputs(out, spec, n)
        if n == batch_size and not (mean.requires_grad or tril.requires_grad):
            warnings.append(
                "neither action_mean nor scale_tril depends on a trainable parameter "
                "(detached or computed with torch.no_grad?); imitation learning cannot change "
                "the actions"
            )
    warnings.extend(_nan_probe(module, spec, batch_size))
    return InfoSchema(weights=weights, latents=latents, warnings=tuple(warnings))


def _call_forward(module: nn.Module, batch: dict, spec: TaskSpec, *, grad: bool):
    shapes = ", ".join(f"{k}: {tuple(v.shape)}" for k, v in batch.items())
    try:
        return policy_forward(module, batch, spec, grad=grad)
    except Exception as exc:
        raise ForwardError(
            f"forward({shapes}) raised {type(exc).__name__}: {exc}\n" + _traceback_tail(exc)
        ) from None


def _check_outputs(out, spec: TaskSpec, n: int):
    a = len(spec.actions)
    if not isinstance(out, tuple | list) or len(out) != 3:
        what = f"a {type(out).__name__}"
        if isinstance(out, tuple | list):
            what += f" of length {len(out)}"
        raise OutputStructureError(
            f"forward must return a triple (action_mean, scale_tril, info); got {what}"
        )
    mean, tril, info = out
    if not isinstance(mean, torch.Tensor) or not mean.is_floating_point():
        raise ActionShapeError(f"action_mean must be a float tensor, got {_describe(mean)}")
    if tuple(mean.shape) != (n, a):
        raise ActionShapeError(
            f"action_mean must have shape (B, A) = ({n}, {a}) for batch size {n}; "
            f"got {tuple(mean.shape)}"
        )
    if not isinstance(tril, torch.Tensor) or not tril.is_floating_point():
        raise ScaleTrilShapeError(f"scale_tril must be a float tensor, got {_describe(tril)}")
    if tuple(tril.shape) != (n, a, a):
        raise ScaleTrilShapeError(
            f"scale_tril must have shape (B, A, A) = ({n}, {a}, {a}) for batch size {n}; "
            f"got {tuple(tril.shape)} (use torch.diag_embed(std) for a diagonal factor)"
        )
    if not isinstance(info, dict):
        raise OutputStructureError(f"info must be a dict, got {type(info).__name__}")
    mean_d, tril_d = mean.detach(), tril.detach()
    _require_finite("action_mean", mean_d)
    _require_finite("scale_tril", tril_d)
    upper = torch.triu(tril_d, diagonal=1).abs()
    if bool((upper > _UPPER_TOL).any()):
        b, i, j = (int(x) for x in torch.nonzero(upper > _UPPER_TOL)[0])
        raise ScaleTrilNotLowerTriangularError(
            f"scale_tril must be lower-triangular; entry [{b}, {i}, {j}] above the diagonal is "
            f"{float(tril_d[b, i, j]):.4g} (use torch.tril(...) or torch.diag_embed(std))"
        )
    diag = torch.diagonal(tril_d, dim1=-2, dim2=-1)
    if bool((diag <= 0).any()):
        b, i = (int(x) for x in torch.nonzero(diag <= 0)[0])
        raise ScaleTrilDiagonalError(
            f"scale_tril diagonal must be positive; entry [{b}, {i}, {i}] is "
            f"{float(diag[b, i]):.4g} (use exp(log_std) or softplus(...) + eps)"
        )
    weights: list[str] = []
    latents: list[str] = []
    for key, value in info.items():
        if not isinstance(key, str) or not INFO_KEY_RE.match(key):
            raise InfoKeyError(
                f"info key {key!r} must be 'weight_<name>' or 'latent_<name>' with <name> made of "
                "lower-case letters, digits and underscores"
            )
        if not isinstance(value, torch.Tensor):
            raise InfoKeyError(f"info[{key!r}] must be a torch.Tensor, got {_describe(value)}")
        expected = (1,) if is_weight(key) else (n,)
        if tuple(value.shape) != expected:
            kind = "weight_* keys hold one value, shape (1,)" if is_weight(key) else (
                "latent_* keys hold one value per batch row, shape (B,)"
            )
            raise InfoShapeError(
                f"info[{key!r}] must have shape {expected} for batch size {n} ({kind}); got "
                f"{tuple(value.shape)}; split multi-dimensional quantities into several keys"
            )
        _require_finite(f"info[{key!r}]", value.detach())
        (weights if is_weight(key) else latents).append(key)
    return tuple(weights), tuple(latents), mean, tril


def _nan_probe(module: nn.Module, spec: TaskSpec, n: int) -> list[str]:
    batch = dummy_batch(spec, n)
    first = spec.inputs[0]
    batch[first.name].view(n, -1)[0, 0] = float("nan")
    where = f"{first.name} column {first.columns[0]!r}"
    try:
        mean, tril, info = policy_forward(module, batch, spec)
    except Exception as exc:
        return [f"forward raised {type(exc).__name__} when {where} was NaN: {exc}"]
    try:
        bad = [
            name
            for name, value in (("action_mean", mean), ("scale_tril", tril))
            if not bool(torch.isfinite(value).all())
        ]
    except TypeError:
        return []
    if bad:
        return [f"a NaN in {where} makes {' and '.join(bad)} non-finite; guard with torch.nan_to_num"]
    return []


def _require_finite(name: str, value: torch.Tensor) -> None:
    finite = torch.isfinite(value)
    if not bool(finite.all()):
        index = tuple(int(x) for x in torch.nonzero(~finite)[0])
        raise NonFiniteOutputError(
            f"{name} is not finite at index {list(index)} (value {float(value[index])}) on a "
            "finite dummy batch"
        )


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def _traceback_tail(exc: BaseException) -> str:
    lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()
    return "\n".join(lines[-_TRACEBACK_LINES:])


__all__ = [
    "ContractError",
    "InfoSchema",
    "build_policy",
    "dummy_batch",
    "load_policy_class",
    "policy_forward",
    "validate_policy",
]
