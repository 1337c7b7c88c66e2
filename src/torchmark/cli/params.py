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


class Proportion(click.ParamType):
    """A share, written as in Python (a fraction: 0.95) or as a percent with its sign
    (95%). A bare number of 1 or more is refused as ambiguous rather than guessed."""

    name = "fraction"

    def __init__(self, low: float, high: float, low_open: bool = False,
                 high_open: bool = False) -> None:
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open

    def convert(self, value, param, ctx):
        from torchmark.core.errors import UsageError
        from torchmark.core.proportion import parse_proportion

        try:
            return parse_proportion(value, self.low, self.high, low_open=self.low_open,
                                    high_open=self.high_open)
        except UsageError as e:
            self.fail(str(e), param, ctx)


def check_syntax(*parts: tuple[str, str]) -> None:
    """Each piece of user code (what, code) compiles on its own, dedented as Timer
    dedents it; else an error (exit 2) naming the piece and its own line (timeit's check
    would count the setup's lines too and name `<timeit-src>`)."""
    from torchmark.timing.timer_class import clean_code

    for what, code in parts:
        try:
            compile(clean_code(code), what, "exec")
        except SyntaxError as e:
            line = f", line {e.lineno}" if e.lineno else ""
            text = f": {e.text.strip()}" if e.text and e.text.strip() else ""
            error = click.ClickException(f"{what}{line}: SyntaxError: {e.msg}{text}")
            error.exit_code = 2  # type: ignore[misc]  # bad input, as other usage errors
            raise error from None
