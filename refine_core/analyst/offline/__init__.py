"""The offline analyst: rule-based, deterministic, no network (see analyst.py)."""

from refine_core.analyst.offline.analyst import OfflineAnalyst

__all__ = ["OfflineAnalyst"]
