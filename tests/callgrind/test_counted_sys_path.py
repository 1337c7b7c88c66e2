"""The sys.path a counted process gets: without the folders that packages put on sys.path
when imported (setuptools' _vendor, Ray's thirdparty_files), so that counts do not depend
on what the asking process happened to import before (they moved by up to 1.3%)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import torchmark
from torchmark.callgrind import collector


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "lib" / "site-packages"
    (site / "pkg" / "_vendor").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    (site / "plain").mkdir()  # a folder, not a package: someone put it there on purpose
    return site


def test_vendored_folders_of_installed_packages_are_left_out(tmp_path):
    site = _site(tmp_path)
    path = ["/work/bin", str(site), "/opt/src", str(site / "pkg" / "_vendor"),
            str(site / "plain"), str(tmp_path / "pkg" / "_vendor")]
    assert collector.counted_sys_path(path) == (
        "/work/bin", str(site), "/opt/src", str(site / "plain"), str(tmp_path / "pkg" / "_vendor"))
    # without a site-packages folder on the path, nothing is a package's vendored folder
    assert collector.counted_sys_path(path[2:]) == tuple(path[2:])


class _Sent(Exception):
    pass


def test_a_request_carries_the_same_sys_path_whatever_was_imported_before(
        tmp_path, monkeypatch):
    site = _site(tmp_path)
    host = collector.Host()
    host._dir = tmp_path
    frames = []

    def exchange(frame, timeout):
        frames.append(frame)
        raise _Sent

    monkeypatch.setattr(host, "_ensure_started", lambda: None)
    monkeypatch.setattr(host, "_exchange", exchange)
    request = torchmark.Timer("pass")._callgrind_request(1, 1, False)
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    for path in (list(sys.path), [*sys.path, str(site / "pkg" / "_vendor")]):
        monkeypatch.setattr(sys, "path", path)
        with pytest.raises(_Sent):
            host.run(request)
    # each request links its paths from its own folder
    sent = [[entry.replace(frame.folder, "") for entry in frame.sys_path] for frame in frames]
    assert sent[0] == sent[1]


def test_the_counted_process_sees_paths_of_one_length_whatever_the_folders(tmp_path):
    short, long = tmp_path / "a", tmp_path / ("a_much_longer_folder_name" * 3) / "b"
    for folder in (short, long):
        folder.mkdir(parents=True)
        (folder / "mod.py").write_text("")
    seen = []
    for k, folder in enumerate((short, long)):
        request = tmp_path / f"request-{k}"
        request.mkdir()
        aliases = collector.aliased_paths(request, str(folder), ["", str(folder), "/usr/lib",
                                                                sys.prefix])
        # the interpreter's own folders stay as they are
        assert list(aliases.values()) == [str(folder), str(folder), "/usr/lib"]
        assert collector.shared_by_every_caller(sys.prefix + "/lib/python3/site-packages")
        assert all((Path(link) / "mod.py").exists() for link in list(aliases)[:2])
        seen.append([len(link) for link in aliases])
        error = f'File "{list(aliases)[1]}/mod.py", line 1'
        assert collector.unaliased(error, aliases) == f'File "{folder}/mod.py", line 1'
    assert seen[0] == seen[1]
