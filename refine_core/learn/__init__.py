"""Fitting programs: imitation learning from one demonstration (RL lives in `rl.py`)."""

from refine_core.learn.il import FitError, FitReport, ILConfig, fit_il

__all__ = ["FitError", "FitReport", "ILConfig", "fit_il"]
