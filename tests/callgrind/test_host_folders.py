"""Temporary folders of callgrind hosts: those of hosts that are gone are removed."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

from torchmark.callgrind import collector


def _host_folder(root, name: str, pid: int | None):
    folder = root / f"{collector.HOST_FOLDER_PREFIX}{name}"
    (folder / "out").mkdir(parents=True)
    (folder / "out" / "callgrind.out.1").write_text("totals: 0\n")  # a host's exit dump
    if pid is not None:
        (folder / collector.HOST_PID_FILE).write_text(str(pid))
    return folder


def test_folders_of_dead_hosts_are_removed_and_live_ones_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = _host_folder(tmp_path, "dead", gone.pid)
    alive = _host_folder(tmp_path, "alive", os.getpid())
    starting = _host_folder(tmp_path, "starting", None)  # no pid file yet
    old = _host_folder(tmp_path, "old", None)  # from before pid files, two days old
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    other = tmp_path / "unrelated-folder"
    other.mkdir()
    collector.remove_dead_host_folders()
    assert not dead.exists() and not old.exists()
    assert alive.exists() and starting.exists() and other.exists()
