"""`torchmark env`: the machine and environment fingerprint of this machine or of a
stored run (`show`), the differences between two (`diff`), and the settings that make
timing noisy here (`check`)."""

from __future__ import annotations

from typing import Any

import click

from torchmark.cli.store_options import db_option

REF_HELP = ("A run id (12 or run:12), latest, commit:SHA, env:LABEL, a results file, or "
            "`here` (this machine now)")


@click.group("env")
def env_cmd():
    """The machine and environment a run measured in (core/fingerprint.py)."""


def _fingerprint(ref: str, db: str | None) -> tuple[dict[str, Any], str]:
    """The fingerprint `ref` names, and its description."""
    from torchmark.core.errors import UsageError

    if ref == "here":
        return _here(), "this machine now"
    from torchmark.cli.store_options import store_for_refs
    from torchmark.regressions.refs import resolve_side

    side = resolve_side(ref, store_for_refs((ref,), db))
    provenance = next((r.provenance for r in side.results if r.provenance is not None), None)
    if provenance is None or not provenance.environment:
        raise UsageError(f"{ref}: its results record no environment fingerprint (made "
                         "before torchmark kept one, or by a tool that gives none)")
    return provenance.fingerprint, side.describe()


def _here() -> dict[str, Any]:
    """This machine's fingerprint as a run here would record it (torch imported)."""
    import torch  # noqa: F401  (its build and threads are part of the fingerprint)

    from torchmark.core import fingerprint, system_check

    fields = fingerprint.capture()
    noisy = system_check.warnings(fields)
    if noisy:
        fields["check.warnings"] = "; ".join(noisy)
    return fields


def _lines(fields: dict[str, Any]) -> list[str]:
    from torchmark.core.fingerprint import CAPTURED, is_blocking
    from torchmark.core.neutralise import terminal_text

    width = max((len(k) for k in fields), default=0)
    return [terminal_text(f"{'*' if is_blocking(k) else ' '} {k:<{width}}  {v}")
            for k, v in sorted(fields.items()) if k != CAPTURED]


@env_cmd.command("show")
@click.argument("ref", default="here", metavar="[RUN]")
@db_option
def show_cmd(ref, db):
    """The fingerprint of RUN (default: this machine now), one field a line; `*` marks
    the fields that change performance (two runs that differ in one are not compared
    without --allow-env-diff). RUN: see `env diff`."""
    fields, where = _fingerprint(ref, db)
    click.echo(f"{where}:")
    for line in _lines(fields):
        click.echo(line)


@env_cmd.command("diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B", default="here")
@db_option
def diff_cmd(a, b, db):
    """The fields in which A's fingerprint and B's (default: this machine now) differ,
    those that change performance first (marked `*`: the runs are not comparable), then
    the rest. Exit 0 when none change performance, 1 when some do. A, B: """ + REF_HELP
    from torchmark.core.fingerprint import CAPTURED, differences
    from torchmark.core.neutralise import terminal_text

    (fa, wa), (fb, wb) = _fingerprint(a, db), _fingerprint(b, db)
    found = [d for d in differences(fa, fb) if d.name != CAPTURED]
    click.echo(f"A: {wa}")
    click.echo(f"B: {wb}")
    blocking = [d for d in found if d.blocking]
    if not found:
        click.echo("no difference")
        return 0
    width = max(len(d.name) for d in found)
    for d in found:
        shown = lambda v: "(not recorded)" if v is None else str(v)  # noqa: E731
        click.echo(terminal_text(f"{'*' if d.blocking else ' '} {d.name:<{width}}  "
                                 f"{shown(d.a)}  ->  {shown(d.b)}"))
    click.echo(f"{len(found)} difference(s), {len(blocking)} that change performance"
               + (": not comparable (gate, compare, ab and regressions refuse them without "
                  "--allow-env-diff)" if blocking else ""))
    return 1 if blocking else 0


@env_cmd.command("check")
def check_cmd():
    """Warn about the settings of this machine that make timing noisy: a frequency
    governor other than `performance`, turbo / boost on, a loaded machine, busy SMT
    siblings of the CPUs this process may use, thermal throttling, torch threads beyond
    the cgroup's CPU quota. Every run stores the same warnings (but the SMT sampling)
    with its fingerprint. Exit 0 when there is none, 1 otherwise."""
    import torch  # noqa: F401  (its thread count is checked)

    from torchmark.core import fingerprint, system_check

    noisy = system_check.warnings(fingerprint.capture(), sample=True)
    for warning in noisy:
        click.echo(f"warning: {warning}")
    click.echo(f"{len(noisy)} warning(s)" if noisy else "no setting found that makes "
               "timing noisy")
    return 1 if noisy else 0
