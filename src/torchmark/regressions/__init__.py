"""Regressions: change points in a series of runs (`detect`), false-discovery-rate
control across many series (`select_fdr`), thresholds measured on A/A history
(`calibrate`). Importing this package is cheap: numpy, scipy and ruptures load on the
first detection."""

from torchmark.regressions.calibrate import calibrate
from torchmark.regressions.detect import ChangePoint, Thresholds, detect, select_fdr

__all__ = ["ChangePoint", "Thresholds", "calibrate", "detect", "select_fdr"]
