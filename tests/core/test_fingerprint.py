"""The environment fingerprint: what it captures, which differences block a comparison,
and `torchmark env show / diff / check`; gate, compare and ab refuse runs of
incomparable environments (exit 2) unless --allow-env-diff, which marks the verdicts."""

from __future__ import annotations

import dataclasses
import os

import pytest

from torchmark.cli.main import main
from torchmark.core import fingerprint, system_check
from torchmark.core.provenance import Provenance
from torchmark.core.result import Case, Result
from torchmark.core.results_file import save_results

# ten differences planted in the candidate's fingerprint: every one changes performance
PLANTED = {
    "env.OMP_NUM_THREADS": "1", "env.MKL_NUM_THREADS": "1",
    "env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "torch.git": "0123456789abcdef", "torch.version": "2.12.0+cpu",
    "cpu.quota": 0.5, "cpu.model": "Some Other CPU", "threads.intra_op": 1,
    "gpu.0.sm_clock_max": 1410, "gpu.0.power_limit_w": 300.0,
}


def test_capture_reads_this_machine_and_torch_where_imported():
    import torch

    fields = fingerprint.capture()
    assert fields["cpu.threads"] == os.cpu_count()
    assert fields["threads.intra_op"] == torch.get_num_threads()
    assert fields["torch.version"] == torch.__version__
    assert fields["python.version"].split()[-1] == \
        ".".join(map(str, os.sys.version_info[:3]))
    assert fields[fingerprint.CAPTURED] is True


def test_performance_variables_are_kept_and_secrets_masked(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("TORCH_HUB_TOKEN", "s3cret")
    monkeypatch.setenv("HOME_COLOR", "blue")
    fields = fingerprint.capture()
    assert fields["env.OMP_NUM_THREADS"] == "3"
    assert fields["env.TORCH_HUB_TOKEN"] == "****"
    assert "env.HOME_COLOR" not in fields


def test_differences_put_the_blocking_fields_first():
    a = {"cpu.model": "X", "load.1m": 0.1, "torch.version": "2.13",
         fingerprint.CAPTURED: True}
    b = {"cpu.model": "X", "load.1m": 3.0, "torch.version": "2.14",
         "env.OMP_NUM_THREADS": "4", fingerprint.CAPTURED: True}
    found = fingerprint.differences(a, b)
    assert [(d.name, d.blocking) for d in found] == [
        ("env.OMP_NUM_THREADS", True), ("torch.version", True), ("load.1m", False)]
    assert found[0].a == fingerprint.UNSET
    # a side that did not read the variables (another tool's file) does not block
    del a[fingerprint.CAPTURED]
    variable = next(d for d in fingerprint.differences(a, b)
                    if d.name == "env.OMP_NUM_THREADS")
    assert variable.a is None and not variable.blocking


def test_system_check_warns_about_noisy_settings():
    noisy = system_check.warnings({"cpu.governor": "powersave", "cpu.boost": True,
                                   "cpu.threads": 2, "cpu.affinity": "0-1",
                                   "load.1m": 5.0, "cpu.quota": 1.0,
                                   "threads.intra_op": 4})
    assert len(noisy) >= 4
    assert any("powersave" in w for w in noisy) and any("boost" in w for w in noisy)
    assert any("loaded" in w for w in noisy) and any("quota" in w for w in noisy)
    assert system_check.warnings({"cpu.governor": "performance", "cpu.boost": False,
                                  "cpu.threads": 2, "load.1m": 0.1}) == \
        [w for w in system_check.warnings({}) if "throttl" in w]


def _runs(tmp_path, planted):
    """Two results files of one case, equal samples, the second's fingerprint planted."""
    import torch  # noqa: F401  (the fingerprint then holds torch's build)

    base = Provenance.capture()
    fields = {**base.fingerprint, **planted}
    cand = dataclasses.replace(base, environment=tuple(sorted(fields.items())))
    case = Case(id="timeit:planted", frontend="timeit", stmt="x + 1")
    paths = []
    for i, provenance in enumerate((base, cand)):  # samples a hair apart: two results
        samples = [1e-6 * (1 + 0.001 * (k % 5) + 1e-6 * i) for k in range(20)]
        path = tmp_path / f"run{i}.jsonl"
        save_results(path, [Result(case, "wall", samples, provenance=provenance)])
        paths.append(str(path))
    return paths


def test_env_diff_shows_every_planted_difference_and_gate_refuses_them(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    a, b = _runs(tmp_path, PLANTED)
    assert main(["import", a, b, "--db", db]) == 0
    capsys.readouterr()
    assert main(["env", "diff", "run:1", "run:2", "--db", db]) == 1
    out = capsys.readouterr().out
    shown = [line.split()[1] for line in out.splitlines() if line.startswith("* ")]
    assert sorted(shown) == sorted(PLANTED), out
    assert "10 difference(s), 10 that change performance" in out
    assert main(["gate", "--baseline", "run:1", "--candidate", "run:2", "--db", db]) == 2
    err = capsys.readouterr().err
    assert "differ in 10 field(s)" in err and all(name in err for name in PLANTED)
    assert err.strip().splitlines()[-1].startswith("torchmark: error:")
    assert main(["gate", "--baseline", "run:1", "--candidate", "run:2", "--db", db,
                 "--allow-env-diff"]) == 0
    out = capsys.readouterr().out
    assert "environments differ" in out and "1 same" in out
    for command in (["compare", "run:1", "run:2"], ["ab", "run:1", "run:2"], ["ab", a, b],
                    ["compare", a, b], ["compare", a, a, b]):
        assert main([*command, "--db", db]) == 2
        out, err = capsys.readouterr()
        assert "not comparable" in err and out == ""  # refused before any table
        assert main([*command, "--db", db, "--allow-env-diff"]) in (0, 1)
        out = capsys.readouterr().out
        if command[0] == "ab" or command[1] == "run:1":  # verdicts: each marked on stdout
            assert "note: every verdict above is of environments differ" in out, command
    assert main(["ab", a, b, "--allow-env-diff", "--format", "jsonl"]) in (0, 1)
    assert "compared with --allow-env-diff)]" in capsys.readouterr().out


def test_files_compare_when_only_the_noise_differs(tmp_path, capsys):
    a, b = _runs(tmp_path, {"load.1m": 7.5, "cpu.governor": "powersave"})
    assert main(["gate", "--baseline", a, "--candidate", b]) == 0
    assert "environments differ" not in capsys.readouterr().out
    assert main(["compare", a, b]) == 0
    assert "not comparable" not in capsys.readouterr().err


def test_env_show_and_check_run_here(capsys):
    assert main(["env", "show"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("this machine now:") and "* cpu.model" in out
    code = main(["env", "check"])
    out = capsys.readouterr().out
    assert (code, "no setting found" in out) in ((0, True), (1, False))


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}])
def test_a_fingerprint_of_other_values_is_refused(value):
    data = Provenance.capture().to_dict()
    data["environment"] = {"cpu.model": value}
    with pytest.raises(ValueError, match="environment.cpu.model"):
        Provenance.from_dict(data)
