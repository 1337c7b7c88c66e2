"""Kept so that Measurements pickled before TaskSpec moved to torchmark.core load."""

from torchmark.core.task_spec import TaskSpec

__all__ = ["TaskSpec"]
