"""Long waits are said, Ctrl-C keeps what was measured, warm hosts are reused."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from torchmark.cli.main import main
from torchmark.core.announce import announced

from conftest import deliverable_sigint


def test_a_wait_is_said_once_it_lasts(monkeypatch, capsys):
    monkeypatch.setenv("TORCHMARK_PROGRESS", "1")
    with announced("compiling something", after=0.05):
        time.sleep(0.3)
    assert "torchmark: compiling something..." in capsys.readouterr().err
    with announced("quick", after=5):
        pass
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("TORCHMARK_PROGRESS", "0")
    with announced("never shown", after=0.01):
        time.sleep(0.1)
    assert capsys.readouterr().err == ""


def test_ctrl_c_in_timeit_prints_and_saves_what_was_measured(tmp_path):
    save, started = tmp_path / "m.json", tmp_path / "started"
    setup = f"import pathlib, torch; x = torch.ones(3); pathlib.Path({str(started)!r}).touch()"
    proc = subprocess.Popen([sys.executable, "-m", "torchmark", "timeit", "x + 1", "-s",
                             setup, "--min-run-time", "60", "--save", str(save)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=deliverable_sigint)
    deadline = time.monotonic() + 120
    while not started.exists() and time.monotonic() < deadline:  # the setup ran: timing
        time.sleep(0.1)
    time.sleep(3)  # some blocks measured
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Median:" in out and "(interrupted after " in out, out
    assert err.strip().splitlines()[-1] == "torchmark: error: interrupted"
    from torchmark.timing.files import load_measurements

    assert len(load_measurements(save)) == 1


def test_collect_many_serves_from_the_process_host_first(monkeypatch):
    """workers=1 uses the process's host (warm once used); more workers add hosts, and
    only those are closed."""
    from torchmark import Timer
    from torchmark.callgrind import batch

    used, closed = [], []

    class FakeHost:
        def __init__(self, name="extra"):
            self.name = name

        def run(self, request):
            used.append(self.name)
            return (request,)

        def close(self):
            closed.append(self.name)

    own = FakeHost("own")
    monkeypatch.setattr(batch, "default_host", lambda: own)
    monkeypatch.setattr(batch, "Host", FakeHost)
    monkeypatch.setattr(batch, "result_for", lambda stats, repeats: stats[0])
    timers = [Timer("pass"), Timer("1")]
    batch.collect_many(timers, number=1)
    assert used == ["own", "own"] and closed == []
    used.clear()
    batch.collect_many(timers, number=1, workers=2)
    assert set(used) <= {"extra", "own"} and closed == ["extra"]


def test_stop_host_with_none_running(capsys, tmp_path, monkeypatch):
    from torchmark.callgrind import collector

    monkeypatch.setattr(collector, "shared_hosts_dir", lambda: tmp_path)
    assert main(["callgrind", "--stop-host"]) == 0
    assert "no kept-alive valgrind host is running" in capsys.readouterr().out
    assert main(["callgrind", "--stop-host", "x"]) == 2
