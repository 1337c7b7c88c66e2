"""nvbench's JSON into the store (store/formats/nvbench.py).

nvbench needs CUDA and a GPU, so the files here are written by hand, following its JSON
format 1.0 as https://github.com/NVIDIA/nvbench defines it: docs/json_output.md (the
document; numbers in "value" fields written as strings; the `--jsonbin` sample files
`<json name>-bin/N.bin`, little-endian float32, named by a summary relative to the
JSON's folder) and nvbench/json_printer.cu (the writer: meta, devices, benchmarks with
axes and states, each state's axis_values and summaries as [{name, type, value}]), with
the summary tags of nvbench/detail/measure_cold.cu and measure_hot.cu."""

from __future__ import annotations

import copy
import json
import random
import statistics
import struct
from pathlib import Path

import pytest

from torchmark.cli.main import main
from torchmark.store import Store
from torchmark.store.formats import FORMATS, detect_format, google_benchmark, nvbench

SIZE = 200  # samples in the sample_times file


def named(name, kind, value):
    return {"name": name, "type": kind, "value": str(value)}


def summary(tag, *data, **strings):
    return {"tag": tag, **strings, "data": list(data)}


def cold(mean, samples, relative=0.01):
    return [summary("nv/cold/sample_size", named("value", "int64", samples), name="Samples",
                    hint="sample_size"),
            summary("nv/cold/time/cpu/mean", named("value", "float64", mean * 1.2),
                    name="CPU Time", hint="duration"),
            summary("nv/cold/time/gpu/mean", named("value", "float64", mean),
                    name="GPU Time", hint="duration"),
            summary("nv/cold/time/gpu/stdev/relative", named("value", "float64", relative),
                    name="Noise", hint="percentage")]


def state(name, axis_values, summaries, skipped=False):
    return {"name": name, "min_samples": 10, "min_time": 0.5, "max_noise": 0.005,
            "skip_time": -1.0, "timeout": 15.0, "device": 0, "type_config_index": 0,
            "axis_values": axis_values, "summaries": summaries, "is_skipped": skipped,
            **({"skip_reason": "unsupported type"} if skipped else {})}


def document(filename, times, scale):
    """An nvbench run: `copy` over two sizes (the first with its sample file, named
    `filename`) and a skipped type; `reduce` without axes, with batch times; the times
    without a sample file are `scale` times 80, 5 and 4.5 us."""
    i32 = named("T", "string", "I32")
    copies = [
        state("Device=0 T=I32 Elements=2^20", [i32, named("Elements", "int64", 1 << 20)],
              cold(statistics.fmean(times), len(times)) + [summary(
                  "nv/json/bin:nv/cold/sample_times", named("filename", "string", filename),
                  named("size", "int64", len(times)), name="Samples Times File",
                  hint="file/sample_times", hide="Not needed in table.")]),
        state("Device=0 T=I32 Elements=2^24", [i32, named("Elements", "int64", 1 << 24)],
              cold(80e-6 * scale, 1500)),
        state("Device=0 T=I8 Elements=2^20", [named("T", "string", "I8"),
                                              named("Elements", "int64", 1 << 20)], [],
              skipped=True)]
    reduce = state("Device=0", [], cold(5e-6 * scale, 4000) + [
        summary("nv/batch/sample_size", named("value", "int64", 90000), name="Samples"),
        summary("nv/batch/time/gpu/mean", named("value", "float64", 4.5e-6 * scale),
                name="Batch GPU", hint="duration")])
    settings = {"min_samples": 10, "min_time": 0.5, "max_noise": 0.005, "skip_time": -1.0,
                "timeout": 15.0, "devices": [0]}
    return {
        "meta": {"argv": ["./bench", "--jsonbin", "r.json"], "version": {
            "json": {"major": 1, "minor": 0, "patch": 0, "string": "1.0.0"},
            "nvbench": {"major": 0, "minor": 1, "patch": 0, "string": "0.1.0",
                        "git_branch": "main", "git_sha": "0" * 40, "git_version": "0.1.0",
                        "git_is_dirty": False}}},
        "devices": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "sm_version": 900,
                     "ptx_version": 900, "sm_default_clock_rate": 1980000000,
                     "number_of_sms": 132, "max_blocks_per_sm": 32,
                     "max_threads_per_sm": 2048, "max_threads_per_block": 1024,
                     "registers_per_sm": 65536, "registers_per_block": 65536,
                     "global_memory_size": 85031714816,
                     "global_memory_bus_peak_clock_rate": 2619000000,
                     "global_memory_bus_width": 5120,
                     "global_memory_bus_bandwidth": 3352320000000,
                     "l2_cache_size": 52428800, "shared_memory_per_sm": 233472,
                     "shared_memory_per_block": 49152, "ecc_state": True}],
        "benchmarks": [
            {"name": "copy", "index": 0, **settings, "axes": [
                {"name": "T", "type": "type", "flags": "", "values": [
                    {"input_string": "I32", "description": "int32_t", "is_active": True},
                    {"input_string": "I8", "description": "int8_t", "is_active": True}]},
                {"name": "Elements", "type": "int64", "flags": "pow2", "values": [
                    {"input_string": "20", "description": "2^20 = 1048576",
                     "value": 1 << 20},
                    {"input_string": "24", "description": "2^24 = 16777216",
                     "value": 1 << 24}]}],
             "states": copies},
            {"name": "reduce", "index": 1, **settings, "axes": [], "states": [reduce]}]}


def write_run(folder: Path, name: str, scale: float = 1.0, seed: int = 0) -> Path:
    """An nvbench `--jsonbin` run `name` in `folder`: the JSON and its sample file."""
    rng = random.Random(seed)
    times = [10e-6 * scale * (1 + rng.gauss(0, 0.01)) for _ in range(SIZE)]
    scale *= 1 + seed / 1000  # two runs never state the very same means
    (folder / f"{name}-bin").mkdir(parents=True)
    (folder / f"{name}-bin" / "0.bin").write_bytes(struct.pack(f"<{SIZE}f", *times))
    path = folder / name
    path.write_text(json.dumps(document(f"{name}-bin/0.bin", times, scale), indent=2))
    return path


def rows(db):
    """(benchmark, state, metric) -> the stored row (with samples and extra)."""
    return {(r["stmt"], r["sub_label"], r["metric"]): r
            for r in Store(str(db)).results(samples=True)}


def test_states_become_cases_with_their_samples_or_statistics(tmp_path, capsys):
    path, db = write_run(tmp_path, "r.json"), tmp_path / "s.db"
    assert nvbench.detect(path, json.loads(path.read_text()))
    assert not google_benchmark.detect(path, json.loads(path.read_text()))
    assert main(["import", str(path), "--from", "nvbench", "--db", str(db)]) == 0
    found = rows(db)
    assert set(found) == {("copy", "Device=0 T=I32 Elements=2^20", "device"),
                          ("copy", "Device=0 T=I32 Elements=2^24", "device"),
                          ("reduce", "Device=0", "device"), ("reduce", "Device=0", "batch")}
    raw = found["copy", "Device=0 T=I32 Elements=2^20", "device"]
    times = struct.unpack(f"<{SIZE}f", (tmp_path / "r.json-bin" / "0.bin").read_bytes())
    assert raw["n"] == SIZE and raw["median"] == statistics.median(times)
    assert raw["device"] == "cuda:0" and raw["extra"]["cpu_time_mean"] == pytest.approx(
        statistics.fmean(times) * 1.2)
    assert Store(str(db)).case_params()[raw["case_id"]] == {
        "device": 0, "T": "I32", "Elements": 1 << 20}
    stated = found["copy", "Device=0 T=I32 Elements=2^24", "device"]
    # its summary columns are the stated statistics (show, export and history read them)
    assert stated["n"] == 1500 and stated["median"] == 80e-6 and stated["mean"] == 80e-6
    assert stated["iqr"] is None and stated["min"] is None and stated["max"] is None
    assert stated["extra"]["stated"] == {"n": 1500, "mean": 80e-6,
                                         "stdev": pytest.approx(0.01 * 80e-6)}
    batch = found["reduce", "Device=0", "batch"]
    assert batch["median"] == 4.5e-6 and batch["number_per_run"] == 90000
    assert batch["extra"]["stated"] == {"n": 1, "mean": 4.5e-6}
    fingerprint = next(nvbench.read(path)).provenance.fingerprint
    assert fingerprint == {"gpu.0.model": "NVIDIA H100 80GB HBM3", "gpu.0.sm_version": 900,
                           "gpu.0.sm_clock_default": 1980, "gpu.0.memory_clock": 2619,
                           "gpu.0.sms": 132, "gpu.0.memory_bytes": 85031714816,
                           "gpu.0.ecc": True}
    capsys.readouterr()
    assert main(["import", str(path), "--from", "nvbench", "--db", str(db)]) == 0
    assert "0 results added" in capsys.readouterr().out and len(rows(db)) == 4


def test_without_its_sample_file_a_state_states_its_statistics(tmp_path):
    path = write_run(tmp_path, "r.json")
    (tmp_path / "r.json-bin" / "0.bin").unlink()
    result = next(nvbench.read(path))
    assert len(result.samples) == 1 and result.extra["stated"]["n"] == SIZE


def test_detected_without_from(tmp_path):
    for module in FORMATS.values():  # detection asks every format's reader
        pytest.importorskip(module)
    path = write_run(tmp_path, "r.json")
    assert detect_format(path) == "nvbench"
    assert main(["import", str(path), "--db", str(tmp_path / "s.db")]) == 0
    assert len(rows(tmp_path / "s.db")) == 4


def test_a_run_twice_as_slow_fails_the_gate(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    files = [write_run(tmp_path, "base.json"), write_run(tmp_path, "again.json", seed=1),
             write_run(tmp_path, "slow.json", scale=2.0, seed=2)]
    assert main(["import", *map(str, files), "--from", "nvbench", "--db", db]) == 0
    gate = ["gate", "--baseline", "run:1", "--metric", "device", "--db", db]
    capsys.readouterr()
    assert main([*gate, "--candidate", "run:2"]) == 0
    assert main([*gate, "--candidate", "run:3"]) == 1
    assert "copy: Device=0 T=I32 Elements=2^20" in capsys.readouterr().out
    # every metric: the batch times state one mean, no interval (unmeasured)
    assert main(["gate", "--baseline", "run:1", "--candidate", "run:2", "--db", db]) in (0, 1)
    assert main(["regressions", "--db", db]) in (0, 1)


def _set_gpu_mean(doc, _folder, value):
    doc["benchmarks"][1]["states"][0]["summaries"][2]["data"][0]["value"] = value


def _set_sample_file(doc, _folder, filename, size=SIZE):
    data = doc["benchmarks"][0]["states"][0]["summaries"][-1]["data"]
    data[0]["value"], data[1]["value"] = filename, str(size)


MALFORMED = {
    "truncated": (None, "not a nvbench JSON file"),
    "a value of the wrong type": (lambda d, f: _set_gpu_mean(d, f, ["5e-06"]),
                                  "value must be float64 (as a string), got ['5e-06']"),
    "a negative time": (lambda d, f: _set_gpu_mean(d, f, "-5e-06"),
                        "nv/cold/time/gpu/mean must be a finite float64 >= 0, got -5e-06"),
    "an unknown value type": (
        lambda d, f: d["benchmarks"][0]["states"][0]["axis_values"][1].update(type="int32"),
        "axis_values[1].type must be one of int64, float64, string, got 'int32'"),
    "a states object (before format 1.0)": (
        lambda d, f: d["benchmarks"][0].update(states={}), "states must be list"),
    "no format version": (lambda d, f: d.pop("meta"),
                          "without meta.version.json (older than format 1.0)"),
    "a sample file outside the folder": (
        lambda d, f: _set_sample_file(d, f, "../outside.bin"),
        "the sample_times file '../outside.bin' is not a path inside the JSON file's folder"),
    "an absolute sample file path": (
        lambda d, f: _set_sample_file(d, f, str(f.parent / "outside.bin")),
        "is not a path inside the JSON file's folder"),
    "a sample file name that is no path": (
        lambda d, f: _set_sample_file(d, f, "r.json-bin/\u0000.bin"),
        "is not a path inside the JSON file's folder"),
    "a sample file of another size": (
        lambda d, f: _set_sample_file(d, f, "r.json-bin/0.bin", size=SIZE + 1),
        f"holds {4 * SIZE} bytes, not {SIZE + 1} float32 values"),
}


@pytest.mark.parametrize("problem", MALFORMED)
def test_a_malformed_file_is_refused_and_nothing_stored(tmp_path, capsys, problem):
    folder, db = tmp_path / "run", tmp_path / "s.db"
    path = write_run(folder, "r.json")
    (tmp_path / "outside.bin").write_bytes(struct.pack("<2f", 1e-5, 1e-5))
    mutate, message = MALFORMED[problem]
    if mutate is None:
        path.write_text(path.read_text()[:1000])
    else:
        doc = copy.deepcopy(json.loads(path.read_text()))
        mutate(doc, folder)
        path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["import", str(path), "--from", "nvbench", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not db.exists() or Store(str(db)).info()["results"] == 0
