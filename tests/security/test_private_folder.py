"""The shared callgrind host's socket folder: private to this user (0700, owned, not a
link), checked before every use, by the client and by the host before it listens; and
the host unpickles nothing from another user."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from torchmark.core.private_folder import (
    UnsafeFolderError,
    check_private,
    peer_uid,
    private_folder,
)


@pytest.fixture
def tmp_base(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    yield tmp_path
    monkeypatch.setattr(tempfile, "tempdir", None)


def test_made_private_and_reused(tmp_base):
    folder = private_folder()
    assert folder == tmp_base / f"torchmark-{os.getuid()}"
    assert (os.stat(folder).st_mode & 0o777) == 0o700
    assert private_folder() == folder


def test_xdg_runtime_dir_is_preferred_when_private(tmp_base, monkeypatch):
    runtime = tmp_base / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert private_folder() == runtime / "torchmark"
    os.chmod(runtime, 0o755)  # a shared one is not used: the temporary folder instead
    assert private_folder() == tmp_base / f"torchmark-{os.getuid()}"


@pytest.mark.parametrize("mode", [0o777, 0o750, 0o701])
def test_a_folder_open_to_others_is_refused(tmp_base, mode):
    folder = tmp_base / f"torchmark-{os.getuid()}"
    folder.mkdir()
    os.chmod(folder, mode)
    with pytest.raises(UnsafeFolderError, match=f"has mode {mode:04o}"):
        private_folder()


def test_a_link_or_a_file_is_refused(tmp_base):
    target = tmp_base / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_base / f"torchmark-{os.getuid()}").symlink_to(target)
    with pytest.raises(UnsafeFolderError, match="symbolic link"):
        private_folder()
    plain = tmp_base / "file"
    plain.write_text("")
    with pytest.raises(UnsafeFolderError, match="not a folder"):
        check_private(plain)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a folder of another user")
def test_a_folder_of_another_user_is_refused(tmp_base):
    folder = tmp_base / f"torchmark-{os.getuid()}"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    with pytest.raises(UnsafeFolderError, match="owned by uid 65534"):
        private_folder()


def test_the_host_will_not_listen_in_an_open_folder(tmp_path):
    """The host checks the socket's folder itself (before importing torch), whoever
    started it."""
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    os.chmod(open_folder, 0o777)
    proc = subprocess.run([sys.executable, "-m", "torchmark.callgrind.host", "--socket",
                           str(open_folder / "h.sock"), "--out-dir", str(tmp_path),
                           "--helper", "/nonexistent"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0
    assert "UnsafeFolderError" in proc.stderr and "has mode 0777" in proc.stderr
    assert not (open_folder / "h.sock").exists()


def test_peer_uid_names_the_other_end(tmp_path):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        assert peer_uid(a) == os.getuid()
    if os.getuid() != 0:
        return
    # a process of another user connecting: its uid is what the host sees (in a folder
    # that user can reach: pytest's own are private)
    import shutil
    import tempfile

    shared = tempfile.mkdtemp(dir="/tmp")
    try:
        os.chmod(shared, 0o755)
        path = os.path.join(shared, "s.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        os.chmod(path, 0o777)
        listener.listen(1)
        listener.settimeout(30)
        code = (f"import os, socket; os.setuid(65534); s = socket.socket(socket.AF_UNIX);"
                f"s.connect({path!r}); s.recv(1)")
        child = subprocess.Popen([sys.executable, "-c", code])
        conn, _ = listener.accept()
        with conn, listener:
            assert peer_uid(conn) == 65534
            conn.sendall(b"x")
        child.wait(timeout=30)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
