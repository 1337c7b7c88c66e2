"""`torchmark ops`: operator benchmarks from a JSON / YAML config (PARAM's format)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from torchmark.cli.executor_options import executor_from, executor_options, node_provenance
from torchmark.cli.store_options import (
    recorder,
    recording_options,
    resume_run_option,
    resumed_cases,
    resumed_records,
)
from torchmark.core.signals import Terminated
from torchmark.core.threads import MAX_THREADS
from torchmark.ops.executor import EXEC_MODES, PROFILER_RANGE_ENV


def _nsight(tool: str, device: str, argv: list[str], prefix: str) -> int:
    """Relaunch this command under Nsight Compute (ncu) or Nsight Systems (nsys)."""
    binary = shutil.which(tool)
    names = {"ncu": "Nsight Compute", "nsys": "Nsight Systems"}
    if binary is None:
        raise click.UsageError(f"--{tool}: {tool} ({names[tool]}) is not installed or not on "
                               "PATH; install NVIDIA Nsight tools or drop the flag")
    if not device.startswith("cuda"):
        raise click.UsageError(f"--{tool} profiles CUDA kernels: add --device cuda")
    inner = [sys.executable, "-m", "torchmark.cli.main", "ops", *argv]
    env = dict(os.environ)
    if tool == "ncu":  # only the timed calls: not the warm-ups, flushes or graph captures
        cmd = [binary, "--target-processes", "all", "--profile-from-start", "off", "-f",
               "-o", f"{prefix}_ncu", *inner]
        env[PROFILER_RANGE_ENV] = "1"
    else:  # the whole timeline: what happens around the calls is the point of nsys
        cmd = [binary, "profile", "-f", "true", "-o", f"{prefix}_nsys", *inner]
    click.echo("running: " + " ".join(cmd), err=True)
    child = subprocess.Popen(cmd, env=env)
    try:
        return child.wait()
    except KeyboardInterrupt as e:  # Ctrl-C reached the child too; SIGTERM only us
        if isinstance(e, Terminated):
            child.terminate()  # the child writes its footer, as it would on its own
        child.wait()
        raise


@click.command("ops")
@click.option("-c", "--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="Config file (PARAM JSON format, or YAML with the same schema).")
@click.option("-w", "--warmup", type=click.IntRange(min=0), default=5, show_default=True)
@click.option("-i", "--iterations", "--iteration", type=click.IntRange(min=1), default=20,
              show_default=True)
@click.option("-b", "--backward", is_flag=True, help="Also time the backward pass.")
@click.option("-d", "--device", default="cpu", show_default=True, help="cpu, cuda or cuda:N.")
@click.option("--threads", type=click.IntRange(1, MAX_THREADS), default=1, show_default=True,
              help="torch CPU threads for the run (as torch's Timer and every torchmark "
                   "command). The count is printed and recorded in the results.")
@click.option("-o", "--output-prefix", "prefix", default="results/ops-results",
              show_default=True,
              help="Results go to PREFIX.jsonl (replaced; --resume FILE appends).")
@click.option("--exec-mode", type=click.Choice(EXEC_MODES), default="discrete",
              show_default=True)
@click.option("--metric", type=click.Choice(["time", "kernel", "memory"]), default="time",
              show_default=True,
              help="time: as --exec-mode times (device time with continuous_events on a "
                   "GPU); kernel: each call's kernel time, the sum of its kernels' "
                   "durations from the GPU's timestamps (torch.profiler; --device cuda, "
                   "discrete mode); memory: each call's peak bytes and bytes allocated, "
                   "from torch's allocator (docs/metrics.md). See docs/gpu.md.")
@click.option("--l2-flush", is_flag=True, help="Flush the GPU's L2 before each timed call.")
@click.option("--cuda-graph", is_flag=True, help="Time CUDA-graph replays of the op.")
@click.option("--compile", "compile_", is_flag=True, help="Time torch.compile(op).")
@click.option("--resume-id", default=None, help="Start at this case id (inclusive).")
@click.option("--stop-id", default=None, help="Stop before this case id.")
@click.option("--resume", "resume_file", type=click.Path(dir_okay=False), default=None,
              help="Continue this results file: skip its cases, append the others.")
@click.option("--list", "list_only", is_flag=True,
              help="Print every expanded case with its id; run nothing.")
@click.option("--profile", is_flag=True, help="Write a torch.profiler trace PREFIX.trace.json.")
@click.option("--ncu", is_flag=True,
              help="Relaunch under Nsight Compute (PREFIX_ncu), profiling the timed calls only.")
@click.option("--nsys", is_flag=True, help="Relaunch under Nsight Systems (PREFIX_nsys).")
@click.option("--plugin", "plugins", multiple=True,
              help="Import MODULE (a module name or a .py file) first; it registers "
                   "operators with register_op.")
@click.option("--quiet", is_flag=True, help="No progress bar and no table.")
@click.option("--env", default=None, metavar="LABEL",
              help="The run's env label in the store (default: $TORCHMARK_ENV): its "
                   "cases are compared with another label's as env:LABEL.")
@executor_options("On Ray: extra attempts for a case whose worker or node was lost (a "
                  "case that raises is not tried again).")
@resume_run_option
@recording_options
def ops_cmd(config_path, warmup, iterations, backward, device, threads, prefix, exec_mode,
            metric, l2_flush, cuda_graph, compile_, resume_id, stop_id, resume_file, list_only,
            profile, ncu, nsys, plugins, quiet, env, executor, ray_address, ray_resources, retries,
            resume_run, db, no_store):
    """Benchmark operators from a config: every expanded case, one JSON line each (in
    this process, or as Ray tasks with --executor ray)."""
    prefix = prefix.removesuffix(".jsonl")  # `-o run.jsonl` means run.jsonl, not .jsonl.jsonl
    from torchmark.cli.output_files import prepare_output
    from torchmark.ops.executor import RunOptions
    from torchmark.ops.loading import load_config
    from torchmark.ops.registry import load_plugin
    from torchmark.ops.report import describe_config, quantity_of, record_notes, records_table
    from torchmark.ops.results_file import case_place
    from torchmark.ops.runner import SCHEMA, run, select_cases

    for module in plugins:
        if not load_plugin(module):
            click.echo(f"note: --plugin {module} registered no operator (register_op)",
                       err=True)
    config = load_config(config_path)
    options = RunOptions(warmup=warmup, iterations=iterations, backward=backward, device=device,
                         threads=threads, exec_mode=exec_mode, l2_flush=l2_flush,
                         cuda_graph=cuda_graph, compile=compile_, resume_id=resume_id,
                         stop_id=stop_id, metric=metric)
    if list_only:
        cases = select_cases(config, options)
        for case in cases:
            click.echo(f"{case.id}\t{describe_config({'build': case.build, 'input': case.input})}")
        click.echo(f"{len(cases)} cases", err=True)
        return 0
    if metric == "kernel" and (ncu or nsys):
        raise click.UsageError(f"--metric kernel reads CUPTI through torch.profiler, which "
                               f"--{'ncu' if ncu else 'nsys'} holds: drop one of them")
    where = executor_from(executor, ray_address, ray_resources, retries)
    if (ncu or nsys) and where.remote:
        raise click.UsageError(f"--{'ncu' if ncu else 'nsys'} profiles this machine's "
                               "process: use --executor local")
    if ncu or nsys:
        argv = ["-c", config_path, "-w", str(warmup), "-i", str(iterations), "-d", device,
                "--exec-mode", exec_mode, "-o", prefix, "--quiet"]
        argv += ["-b"] * backward + ["--l2-flush"] * l2_flush + ["--cuda-graph"] * cuda_graph
        argv += ["--compile"] * compile_ + [f"--plugin={p}" for p in plugins]
        argv += [f"--threads={threads}"] * bool(threads) + \
            [f"--resume={resume_file}"] * bool(resume_file) + ["--profile"] * profile
        argv += [f"--resume-id={resume_id}"] * bool(resume_id) + \
            [f"--stop-id={stop_id}"] * bool(stop_id)
        argv += [f"--db={db}"] * bool(db) + ["--no-store"] * no_store
        argv += [f"--resume-run={resume_run}"] * bool(resume_run) + [f"--env={env}"] * bool(env)
        codes = [_nsight(tool, device, argv, prefix)
                 for tool, on in (("ncu", ncu), ("nsys", nsys)) if on]
        return max(codes)
    options.validate()
    if not prefix:
        raise click.UsageError("-o/--output-prefix: give a path prefix (PREFIX.jsonl)")
    out = f"{prefix}.jsonl"
    # the stored run's finished cases (its results are per phase: ID@DIGEST#forward, ...)
    done = resumed_cases(db, no_store, resume_run, "ops", group=case_place)
    if not resume_file:
        prepare_output(out, SCHEMA, "ops results", "-o")
    # beside the results: with --resume, beside the file resumed (not -o's prefix)
    stem = str(Path(resume_file).with_suffix("")) if resume_file else prefix
    trace = f"{stem}.trace.json" if profile else None
    profiled: dict[str, Any] = {}
    from rich.console import Console

    from torchmark.cli.progress import RecordTicker, progress_bar

    progress = progress_bar(disable=quiet)
    task = progress.add_task("ops", total=None, failed=0)
    on_record = RecordTicker(progress, task, lambda r: f"{r['id']} "
                             f"({describe_config(r['config'])})")

    started = []

    def on_start(total: int) -> None:  # the inputs are checked: the bar may appear
        progress.update(task, total=total)
        progress.start()
        started.append(True)

    try:
        with recorder(db, no_store, resume_run=resume_run, resumable=True, env=env,
                      config=str(config_path)) as rec:
            import dataclasses

            from torchmark.ops.results_file import results_record
            from torchmark.records import from_ops_record

            header = {"run_options": dataclasses.asdict(options), "threads": threads}

            def on_record_stored(record: dict) -> None:
                on_record(record)
                rec.add(from_ops_record(record, header,  # each case as it finishes
                                        provenance=node_provenance(record)))

            records = run(config, options, out=None if resume_file else out,
                          resume=resume_file, on_record=on_record_stored, on_start=on_start,
                          profile=trace, on_profiled=profiled.update, done=done,
                          executor=where, plugins=plugins,
                          prior=[] if resume_file else resumed_records(
                              db, resume_run, results_record,
                              key=lambda result: result.case.id.split("#")[0]))
    finally:
        if started:  # stopping a bar never shown would print an empty line
            progress.stop()
    if not quiet:
        Console().print(records_table(records, quantity=quantity_of(options)))
        for r in records:
            for note in record_notes(r):
                click.echo(f"note: {r['id']}: {note}")
    written = resume_file or out
    click.echo(f"{len(records) - on_record.failed} ok, {on_record.failed} failed, "
               f"{threads} thread{'s' if threads > 1 else ''} -> {written}"
               + (f"; trace: {trace}" if profiled.get("trace_file") else ""))
    for case_id, reason in (profiled.get("profile_failed") or {}).items():
        click.echo(f"note: {case_id} failed in the --profile pass, left out of the trace: "
                   f"{reason}", err=True)
    return 1 if on_record.failed else 0

