"""`torchmark fuzz`: show the cases a fuzzer generates before timing them."""

from __future__ import annotations

import json

import click

from torchmark.cli.executor_options import executor_from, executor_options, node_provenance
from torchmark.cli.params import FiniteRange
from torchmark.cli.store_options import recorder, recording_options
from torchmark.core.plain_table import align
from torchmark.core.threads import MAX_THREADS


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
@click.option("--time", "stmt", default=None, metavar="STMT",
              help="Time STMT on every case (its tensors and parameters are its globals): "
                   "a fuzzed sweep, recorded as it goes.")
@click.option("--setup", default="pass", show_default=True, help="Setup of --time's STMT.")
@click.option("--min-run-time", type=FiniteRange(min=0, min_open=True), default=0.1,
              show_default=True, help="Seconds of blocked_autorange a case (--time).")
@click.option("--threads", type=click.IntRange(1, MAX_THREADS), default=1, show_default=True,
              help="torch threads while timing (--time).")
@click.option("-o", "--out", type=click.Path(dir_okay=False),
              default="results/fuzz-results.jsonl", show_default=True,
              help="--time: the cases' Results (JSON lines, replaced), each as it finishes.")
@executor_options("--time on Ray: extra attempts for a case whose worker or node was "
                  "lost (a case that raises is not tried again).")
@recording_options
def fuzz_cmd(name, seed, count, fmt, all_params, stmt, setup, min_run_time, threads, out,
             executor, ray_address, ray_resources, retries, db, no_store):
    """Print the cases fuzzer NAME generates: parameters, shapes, strides, contiguity;
    with --time, time a statement on each of them (here, or on Ray).

    NAME is example, binary, unary, spectral, sparse_unary, sparse_binary, or
    module:attribute naming a Fuzzer, a Fuzzer class or a function of `seed`. No tensor
    memory is allocated: the layouts are computed on the meta device.
    """
    from torchmark.core.errors import USER_CODE_FAILURES, error_line
    from torchmark.fuzzing.catalog import describe_case
    from torchmark.op_fuzzers.catalog import make_fuzzer

    fuzzer = make_fuzzer(name, 0 if seed is None else seed)
    if seed is not None and fuzzer.seed != seed:
        raise click.UsageError(f"--seed {seed}: {name} is a ready-made Fuzzer with its own "
                               f"seed ({fuzzer.seed}); name a Fuzzer class or a function "
                               "of seed to choose it")
    if stmt is not None:
        return _sweep(fuzzer, name, count, stmt, setup, min_run_time, threads, out,
                      executor_from(executor, ray_address, ray_resources, retries), db,
                      no_store)
    if executor != "local":
        raise click.UsageError("--executor runs a sweep: add --time STMT")
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


def _sweep(fuzzer, name, count, stmt, setup, min_run_time, threads, out, where, db,
           no_store) -> int:
    """`fuzz NAME --time STMT`: every case timed, its Result recorded as it finishes."""
    from torchmark.cli.output_files import prepare_output
    from torchmark.cli.params import check_syntax
    from torchmark.cli.progress import RecordTicker, progress_bar
    from torchmark.core.result import Failure, Result
    from torchmark.core.results_file import RESULTS_FILE_SCHEMA, save_results
    from torchmark.fuzzing.sweep import FuzzJob, fuzzed_items
    from torchmark.records import from_measurement
    from torchmark.timing.measurement import Measurement

    check_syntax(("--time", stmt), ("--setup", setup))
    prepare_output(out, RESULTS_FILE_SCHEMA, "results", "-o")
    save_results(out, [], append=False)  # a fresh file: the header, the results as they come
    progress = progress_bar()
    task = progress.add_task(f"fuzz {name} on {where.describe()}", total=count, failed=0)
    ticker = RecordTicker(progress, task, lambda r: f"case {r['case']}")

    def result_of(record: dict) -> Result:
        params = {"fuzzer": name, "seed": fuzzer.seed, "case": record["case"],
                  "params": record["params"], "tensors": record["tensors"]}
        provenance = node_provenance(record)
        if record["status"] == "ok":
            return from_measurement(Measurement.from_dict(record["measurement"]), "fuzz",
                                    params=params, provenance=provenance)
        # the case as an ok one would name it (its id from what defines it)
        case = from_measurement(Measurement(1, [1.0], _spec(stmt, setup, name, record,
                                                            threads)),
                                "fuzz", params=params).case
        return Result(case, "wall", failure=Failure(record["error"]), provenance=provenance,
                      extra={"attempts": record.get("attempts")})

    with recorder(db, no_store, fuzzer=name, seed=fuzzer.seed, stmt=stmt) as rec:
        def finished(outcome) -> None:
            record = outcome.record
            if outcome.provenance is not None:
                record = {**record, "provenance": outcome.provenance.to_dict()}
            result = result_of(record)
            save_results(out, [result])
            rec.add([result])
            ticker(record)

        job = FuzzJob(name, stmt, setup, float(min_run_time), threads)
        with progress:
            where.run(job, fuzzed_items(fuzzer, count), finished)
    ok = count - ticker.failed
    click.echo(f"{ok} ok, {ticker.failed} failed -> {out}")
    return 1 if ticker.failed else 0


def _spec(stmt, setup, name, record, threads):
    from torchmark.core.task_spec import TaskSpec

    return TaskSpec(stmt=stmt, setup=setup, label=name, sub_label=f"case {record['case']}",
                    num_threads=threads)
