"""torch.compile measured apart: compile time (cold and with warm caches), graphs, graph
breaks and recompilations from Dynamo, and the steady state against eager, interleaved
(measure.py; Dynamo's counters read in dynamo_events.py)."""

from torchmark.compilation.measure import CompileMeasurement, measure_compile

__all__ = ["CompileMeasurement", "measure_compile"]
