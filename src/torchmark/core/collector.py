"""Python's cycle collector paused while a million small objects are made and freed."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off for a while: an import or a store's history makes
    millions of containers, freed by reference counting, and the collector's passes over
    them (each longer as they pile up) took more time than making them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
