"""`torchmark fuzz`: show the cases a fuzzer generates before timing them."""

from __future__ import annotations

import json

import click

from torchmark.compare.plain_table import align


def _format_table(records: list[dict], shown_params: list[str]) -> str:
    tensor_names = list(records[0]["tensors"]) if records else []
    header = ["case", *shown_params]
    for name in tensor_names:
        header += [f"{name} shape", f"{name} strides / nnz", f"{name} layout"]
    rows = []
    for r in records:
        row = [str(r["case"]), *(str(r["params"].get(p, "")) for p in shown_params)]
        for name in tensor_names:
            t = r["tensors"][name]
            shape = " x ".join(str(s) for s in t["shape"]) or "scalar"
            if t["layout"] == "sparse_coo":
                row += [shape, f"nnz {t['nnz']}",
                        f"sparse ({'coalesced' if t['coalesced'] else 'uncoalesced'})"]
            else:
                row += [shape, ", ".join(str(s) for s in t["strides"]),
                        "contiguous" if t["contiguous"] else "discontiguous"]
        rows.append(row)
    lines = align(header, rows, rule=True)
    return "\n".join(lines)


@click.command("fuzz")
@click.argument("name")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=None,
              help="Seed of the fuzzer's random stream (default 0); a module:attribute "
                   "naming a ready-made Fuzzer keeps its own.")
@click.option("-n", "count", type=click.IntRange(min=1), default=10, show_default=True,
              help="Number of cases.")
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table",
              show_default=True)
@click.option("--all-params", is_flag=True, help="Show every parameter in the table.")
def fuzz_cmd(name, seed, count, fmt, all_params):
    """Print the cases fuzzer NAME generates: parameters, shapes, strides, contiguity.

    NAME is example, binary, unary, spectral, sparse_unary, sparse_binary, or
    module:attribute naming a Fuzzer, a Fuzzer class or a function of `seed`. No tensor
    memory is allocated: the layouts are computed on the meta device.
    """
    from torchmark.core.errors import USER_CODE_FAILURES, error_line
    from torchmark.fuzzing.catalog import describe_case, make_fuzzer

    fuzzer = make_fuzzer(name, 0 if seed is None else seed)
    if seed is not None and fuzzer.seed != seed:
        raise click.UsageError(f"--seed {seed}: {name} is a ready-made Fuzzer with its own "
                               f"seed ({fuzzer.seed}); name a Fuzzer class or a function "
                               "of seed to choose it")
    records = []
    failure = None
    try:
        for i, case in enumerate(fuzzer.preview(count)):
            records.append(describe_case(i, *case))
            if fmt == "jsonl":  # streamed: a later case that fails keeps the earlier ones
                click.echo(json.dumps(records[-1]))
    except BrokenPipeError:  # the reader went away (`| head -1`): not the fuzzer's fault
        raise
    except USER_CODE_FAILURES as e:  # the fuzzer's own definitions failed: one line
        failure = ValueError(f"fuzzer {name!r}: drawing case {len(records)} raised "
                             f"{error_line(e)}")
    if fmt == "table" and records:
        referenced: list[str] = []
        for t in fuzzer.tensors:
            for p in t.referenced_parameters():
                if p not in referenced:
                    referenced.append(p)
        shown = [p.name for p in fuzzer.parameters] if all_params else referenced
        click.echo(f"fuzzer {name}, seed {fuzzer.seed}: {len(records)} "
                   f"case{'s' if len(records) > 1 else ''}")
        click.echo(_format_table(records, shown))
        click.echo(f"rejection rate while drawing: {fuzzer.rejection_rate:.0%}")
    if failure is not None:
        raise failure
