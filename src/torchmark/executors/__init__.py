"""Where work items run: the local pool (the default) or a Ray cluster.

The front-ends (suite, ops, fuzzed sweeps) split their work into Items and a Job (how to
run one); an executor runs them and hands back each Outcome as it finishes. This package
imports only core: the front-ends hand it their Jobs, and Ray is imported only when a
Ray run starts."""

from torchmark.executors.base import Executor, Item, Job, Outcome
from torchmark.executors.local import LocalExecutor
from torchmark.executors.make import make_executor
from torchmark.executors.options import RayOptions

__all__ = ["Executor", "Item", "Job", "LocalExecutor", "Outcome", "RayOptions",
           "make_executor"]
