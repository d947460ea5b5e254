"""What crosses process and sandbox boundaries: program source text plus plain arrays.

A fitted policy is never shipped as a pickle (unpickling runs code); it is rebuilt from its
source, which passes the static check and the contract again on the receiving side, and the
weights are loaded strictly so a bundle whose arrays do not match its program is refused.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from refine_core.policy.contract import build_policy
from refine_core.policy.errors import WeightsMismatchError
from refine_core.tasks.spec import TaskSpec

_SOURCE_KEY = "source"
_WEIGHT_PREFIX = "w:"
_FORMAT_KEY = "format"
_FORMAT = "refine-policy-bundle-1"


class BundleFormatError(ValueError):
    """Bytes that are not a policy bundle (or one with non-numeric arrays)."""


@dataclass
class PolicyBundle:
    """A program and its fitted state (parameters and buffers, by `state_dict` name)."""

    source: str
    weights: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.source, str):
            raise BundleFormatError(f"bundle source must be text, got {type(self.source).__name__}")
        clean = {}
        for name, value in self.weights.items():
            array = np.asarray(value)
            if array.dtype.kind not in "fiub":
                raise BundleFormatError(f"weight {name!r} has non-numeric dtype {array.dtype}")
            clean[str(name)] = array
        self.weights = clean

    @classmethod
    def from_module(cls, source: str, module: nn.Module) -> PolicyBundle:
        return cls(
            source,
            {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()},
        )

    def build(self, spec: TaskSpec, *, static_check: bool = True) -> nn.Module:
        """Build the program (checked and validated) and load the weights strictly. An empty
        `weights` dict means the program's own initial values."""
        module = build_policy(self.source, spec, static_check=static_check)
        if not self.weights:
            return module
        expected = module.state_dict()
        missing = sorted(set(expected) - set(self.weights))
        unexpected = sorted(set(self.weights) - set(expected))
        wrong = [
            f"{k}: program {tuple(expected[k].shape)} vs bundle {self.weights[k].shape}"
            for k in sorted(set(expected) & set(self.weights))
            if tuple(expected[k].shape) != self.weights[k].shape
        ]
        if missing or unexpected or wrong:
            raise WeightsMismatchError(
                f"bundle weights do not fit the program: missing {missing}, unexpected "
                f"{unexpected}, shape mismatches {wrong}"
            )
        state = {
            k: torch.from_numpy(np.array(v)).to(expected[k].dtype) for k, v in self.weights.items()
        }
        module.load_state_dict(state, strict=True)
        return module

    def digest(self) -> str:
        """A content hash (source and weights), for de-duplication and provenance records."""
        h = hashlib.sha256(self.source.encode("utf-8"))
        for name in sorted(self.weights):
            array = np.ascontiguousarray(self.weights[name])
            h.update(name.encode("utf-8"))
            h.update(str(array.dtype).encode() + str(array.shape).encode())
            h.update(array.tobytes())
        return h.hexdigest()

    def to_npz_bytes(self) -> bytes:
        arrays = {_WEIGHT_PREFIX + k: v for k, v in self.weights.items()}
        arrays[_SOURCE_KEY] = np.array(self.source)
        arrays[_FORMAT_KEY] = np.array(_FORMAT)
        buffer = io.BytesIO()
        np.savez(buffer, allow_pickle=False, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_npz_bytes(cls, data: bytes) -> PolicyBundle:
        """Parse bytes from `to_npz_bytes`; pickles are refused (`allow_pickle=False`)."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
        except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
            raise BundleFormatError(f"not a policy bundle: {exc}") from None
        if arrays.get(_FORMAT_KEY) is None or str(arrays[_FORMAT_KEY]) != _FORMAT:
            raise BundleFormatError(f"not a policy bundle (no {_FORMAT!r} marker)")
        if _SOURCE_KEY not in arrays:
            raise BundleFormatError("policy bundle has no program source")
        weights = {
            k[len(_WEIGHT_PREFIX):]: v for k, v in arrays.items() if k.startswith(_WEIGHT_PREFIX)
        }
        return cls(str(arrays[_SOURCE_KEY]), weights)
