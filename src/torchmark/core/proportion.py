"""Shares written as people write them: a fraction (0.05) or a percent with its sign (5%)."""

from __future__ import annotations

import math

from torchmark.core.errors import UsageError


def parse_proportion(value: object, low: float, high: float, *, low_open: bool = False,
                     high_open: bool = False) -> float:
    """`value` (a float, or text: "0.05", "5%") as a fraction within [low, high] (an open
    end excludes its bound). A bare number above 1 is refused as ambiguous rather than
    guessed (1 too: 100% or 1%?); any refusal is a UsageError saying what was expected."""
    if isinstance(value, float):
        number = value
    else:
        text = str(value).strip()
        percent = text.endswith("%")
        try:
            number = float(text[:-1] if percent else text)
        except ValueError:
            raise UsageError(f"{value!r} is not a fraction (0.95) or a percent (95%)") \
                from None
        if not math.isfinite(number):
            raise UsageError(f"{value!r} is not a finite number")
        if percent:
            number /= 100
        elif number >= 1:
            raise UsageError(f"{value} is ambiguous: write {text}% or a fraction such as "
                             f"{number / 100:g}")
    below = number < low or (low_open and number == low)
    above = number > high or (high_open and number == high)
    if below or above or not math.isfinite(number):
        raise UsageError(f"{value} is outside {'(' if low_open else '['}{low:g}, "
                         f"{high:g}{')' if high_open else ']'}")
    return number
