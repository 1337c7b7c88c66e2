"""`torchmark timeit`: time one statement, like `python -m timeit`."""

from __future__ import annotations

import click


@click.command("timeit")
@click.argument("stmt", nargs=-1, required=True)
@click.option("-s", "--setup", multiple=True, help="Setup code, run once (repeatable; lines).")
@click.option("-t", "--threads", "num_threads", type=click.IntRange(min=1), default=1,
              show_default=True, help="torch thread count during the measurement.")
@click.option("--min-run-time", type=click.FloatRange(min=0), default=0.2, show_default=True,
              help="Seconds of measurement to collect.")
@click.option("--label", default=None, help="Label (table title in `compare`).")
@click.option("--sub-label", default=None, help="Sub-label (row name in `compare`).")
@click.option("--description", default=None, help="Description (column in `compare`).")
@click.option("--env", default=None, help="Environment tag for A/B comparisons.")
@click.option("--save", type=click.Path(dir_okay=False), default=None,
              help="Append the Measurement to this JSON file.")
def timeit_cmd(stmt, setup, num_threads, min_run_time, label, sub_label, description, env, save):
    """Time STMT with blocked_autorange and print the Measurement.

    Several STMT arguments are joined as lines, as in `python -m timeit`.
    """
    from torchmark.timing.files import save_measurements
    from torchmark.timing.timer_class import Timer

    timer = Timer(
        stmt="\n".join(stmt),
        setup="\n".join(setup) or "pass",
        num_threads=num_threads,
        label=label,
        sub_label=sub_label,
        description=description,
        env=env,
    )
    m = timer.blocked_autorange(min_run_time=min_run_time)
    click.echo(m.summary())
    if save:
        held = save_measurements(save, [m], append=True)
        click.echo(f"saved to {save} ({len(held)} measurement{'s' if len(held) > 1 else ''})")
