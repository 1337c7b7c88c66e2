"""`torchmark report`: one self-contained HTML file over the store's history (runs,
regressions, per-case history with change points, an A/B view, raw-sample spreads)."""

from torchmark.report.page import write_report

__all__ = ["write_report"]
