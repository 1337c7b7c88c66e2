"""`torchmark callgrind` and `torchmark callgrind-diff`: instruction counts from the shell."""

from __future__ import annotations

import click

from torchmark.cli.params import FiniteRange, check_syntax
from torchmark.cli.store_options import recorder, recording_options
from torchmark.core.threads import MAX_THREADS


@click.command("callgrind")
@click.argument("stmt", nargs=-1)
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
              help="Append the CallgrindStats to this JSON file (as timeit --save appends "
                   "Measurements), for callgrind-diff; a file of another kind is refused.")
@click.option("--keep-alive", type=FiniteRange(min=0), default=600.0, show_default=True,
              help="Seconds the valgrind host waits for the next command before exiting, so "
                   "repeated commands skip its start-up (0: a private host per command; "
                   "TORCHMARK_CALLGRIND_KEEPALIVE overrides).")
@click.option("--stop-host", is_flag=True,
              help="Stop the kept-alive valgrind host now (no STMT), and exit.")
@recording_options
def callgrind_cmd(stmt, setup, num_threads, number, repeats, top, label, save, keep_alive,
                  stop_host, db, no_store):
    """Count the instructions STMT executes (callgrind), and show where they go."""
    import os

    if stop_host:
        if stmt:
            raise click.UsageError("--stop-host takes no statement")
        return _stop_shared_host()
    if not stmt:
        raise click.UsageError("Missing argument 'STMT...'.")
    os.environ.setdefault("TORCHMARK_CALLGRIND_KEEPALIVE", str(keep_alive))
    from torchmark.callgrind.collector import median_repeat
    from torchmark.callgrind.report import describe
    from torchmark.timing.timer_class import Timer

    if save:  # checked before counting, which can take a minute
        from torchmark.callgrind.stats_files import KINDS
        from torchmark.cli.output_files import prepare_output

        prepare_output(save, KINDS, "instruction counts", "--save")
    check_syntax(("the statement", "\n".join(stmt)), ("the setup", "\n".join(setup)))
    timer = Timer("\n".join(stmt), setup="\n".join(setup) or "pass", num_threads=num_threads,
                  label=label)
    from torchmark.callgrind.collector import CallgrindError

    with recorder(db, no_store) as rec:
        try:
            stats = median_repeat(timer.collect_callgrind(number=number, repeats=repeats))
        except CallgrindError as e:  # the statement's own error: its first line, exit 1
            raise click.ClickException(str(e).splitlines()[0]) from None
        from torchmark.records import from_callgrind

        rec.add([from_callgrind(stats, functions=True)])  # what `explain` reads
    click.echo(describe(stats, top))
    if save:
        from torchmark.callgrind.stats_files import save_stats
        from torchmark.core.provenance import Provenance

        held = save_stats(save, stats, rec.provenance or Provenance.capture())
        click.echo(f"\nsaved to {save} ({held} count{'s' if held != 1 else ''} in it)")
    from torchmark.callgrind.collector import keep_alive_seconds

    idle = keep_alive_seconds()
    if idle > 0:  # a detached process stays: say so, and how to stop it
        click.echo(f"note: the valgrind host stays up {idle:g} s after its last use, for the "
                   "next command; `torchmark callgrind --stop-host` stops it now "
                   "(--keep-alive 0: none)", err=True)


def _stop_shared_host() -> int:
    from torchmark.callgrind.collector import SharedHost

    host = SharedHost(idle_s=0)
    if not host.running:
        click.echo("no kept-alive valgrind host is running")
        return 0
    host.stop()
    if host.running:
        raise click.ClickException("asked the kept-alive valgrind host to stop; it is still "
                                   "running after 30 s")
    click.echo("stopped the kept-alive valgrind host")
    return 0


@click.command("callgrind-diff")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--top", type=click.IntRange(min=0), default=20, show_default=True)
@click.option("--inclusive", is_flag=True, help="Compare inclusive counts.")
def callgrind_diff_cmd(files, top, inclusive):
    """Show how the instruction counts of AFTER differ from BEFORE: FILES is BEFORE AFTER
    (the last counts each holds), or one file holding two or more (its first and last),
    as `callgrind --save` appends them."""
    from torchmark.callgrind.report import describe_delta
    from torchmark.callgrind.stats_files import read_counts

    if len(files) > 2:
        raise click.UsageError("give BEFORE AFTER, or one file holding both")
    held = [read_counts(path) for path in files]
    if len(files) == 1:
        if len(held[0]) < 2:
            raise click.UsageError(f"{files[0]} holds {len(held[0])} counts; give two files, "
                                   "or save twice to one")
        before, after = held[0][0], held[0][-1]
    else:
        before, after = held[0][-1], held[1][-1]
    click.echo(describe_delta(before, after, top, inclusive))
