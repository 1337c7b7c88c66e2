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
            error.exit_code = 2  # bad input, as other usage errors
            raise error from None
