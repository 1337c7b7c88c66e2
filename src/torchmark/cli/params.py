"""Option types shared by the commands."""

from __future__ import annotations

import math

import click


class FiniteRange(click.FloatRange):
    """A float range that also refuses nan and inf (click's FloatRange lets both pass a
    lower bound, and they then fail deep inside a run)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number
