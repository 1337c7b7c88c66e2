"""`torchmark callgrind` and `torchmark callgrind-diff`: instruction counts from the shell."""

from __future__ import annotations

from pathlib import Path

import click

from torchmark.cli.params import FiniteRange, check_syntax
from torchmark.timing.clocks import MAX_THREADS


def _load(path: str):
    from torchmark.callgrind.stats import CallgrindStats
    from torchmark.core.bounded_input import brief, read_bytes
    from torchmark.core.errors import LimitError, error_line

    text = read_bytes(path, "callgrind stats file")
    try:
        return CallgrindStats.from_json(text)
    except LimitError as e:
        raise LimitError(f"{brief(str(path))}: {e}") from None
    except (ValueError, TypeError, AttributeError, KeyError, OverflowError) as e:
        raise ValueError(f"{brief(str(path))}: not a callgrind stats file torchmark can read "
                         f"({error_line(e)})") from None


@click.command("callgrind")
@click.argument("stmt", nargs=-1, required=True)
@click.option("-s", "--setup", multiple=True, help="Setup code, run once (repeatable; lines).")
@click.option("-t", "--threads", "num_threads", type=click.IntRange(1, MAX_THREADS), default=1,
              show_default=True)
@click.option("--number", type=click.IntRange(min=1), default=100, show_default=True,
              help="Runs of STMT per measurement.")
@click.option("--repeats", type=click.IntRange(min=1), default=3, show_default=True,
              help="Measurements; the one with the median total is reported.")
@click.option("--top", type=click.IntRange(min=0), default=15, show_default=True,
              help="Functions to list.")
@click.option("--label", default=None)
@click.option("--save", type=click.Path(dir_okay=False), default=None,
              help="Write the CallgrindStats as JSON (for callgrind-diff; an earlier counts "
                   "file is replaced, another file refused).")
@click.option("--keep-alive", type=FiniteRange(min=0), default=600.0, show_default=True,
              help="Seconds the valgrind host waits for the next command before exiting, so "
                   "repeated commands skip its start-up (0: a private host per command; "
                   "TORCHMARK_CALLGRIND_KEEPALIVE overrides).")
def callgrind_cmd(stmt, setup, num_threads, number, repeats, top, label, save, keep_alive):
    """Count the instructions STMT executes (callgrind), and show where they go."""
    import os

    os.environ.setdefault("TORCHMARK_CALLGRIND_KEEPALIVE", str(keep_alive))
    from torchmark.callgrind.collector import median_repeat
    from torchmark.callgrind.report import describe
    from torchmark.timing.timer_class import Timer

    if save:  # checked before counting, which can take a minute
        from torchmark.callgrind.stats import SCHEMA_NAME
        from torchmark.cli.output_files import prepare_output

        prepare_output(save, SCHEMA_NAME, "instruction counts", "--save")
    check_syntax(("the statement", "\n".join(stmt)), ("the setup", "\n".join(setup)))
    timer = Timer("\n".join(stmt), setup="\n".join(setup) or "pass", num_threads=num_threads,
                  label=label)
    from torchmark.callgrind.collector import CallgrindError

    try:
        stats = median_repeat(timer.collect_callgrind(number=number, repeats=repeats))
    except CallgrindError as e:  # the statement's own error: its first line, exit 1
        raise click.ClickException(str(e).splitlines()[0]) from None
    click.echo(describe(stats, top))
    if save:
        Path(save).write_text(stats.to_json(indent=1) + "\n")
        click.echo(f"\nsaved to {save}")


@click.command("callgrind-diff")
@click.argument("before", type=click.Path(dir_okay=False))
@click.argument("after", type=click.Path(dir_okay=False))
@click.option("--top", type=click.IntRange(min=0), default=20, show_default=True)
@click.option("--inclusive", is_flag=True, help="Compare inclusive counts.")
def callgrind_diff_cmd(before, after, top, inclusive):
    """Show how the instruction counts in AFTER differ from BEFORE (files from --save)."""
    from torchmark.callgrind.report import describe_delta

    click.echo(describe_delta(_load(before), _load(after), top, inclusive))
