"""A folder only this user can enter, for sockets and other files that another user must
not reach (the shared callgrind host's socket: whatever arrives there is unpickled and
run). `$XDG_RUNTIME_DIR/torchmark` where the session has one, else
`<tmp>/torchmark-<uid>`; created with mode 0700, and refused unless it is a real folder
(not a link) owned by this user with no group or other bits."""

from __future__ import annotations

import os
import socket
import stat
import struct
import tempfile
from pathlib import Path

from torchmark.core.errors import TorchmarkError


class UnsafeFolderError(TorchmarkError):
    """The private folder exists but another user could reach into it."""


def check_private(folder: str | os.PathLike) -> Path:
    """`folder`, or UnsafeFolderError when it is a link, not a folder, owned by another
    user, or open to group or others."""
    folder = Path(folder)
    info = os.lstat(folder)
    problem = None
    if stat.S_ISLNK(info.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder"
    elif info.st_uid != os.getuid():
        problem = f"is owned by uid {info.st_uid}, not by this user ({os.getuid()})"
    elif info.st_mode & 0o077:
        problem = f"has mode {stat.S_IMODE(info.st_mode):04o}; group and others must have none"
    if problem:
        raise UnsafeFolderError(f"{folder} {problem}: torchmark keeps its sockets there and "
                                "refuses to use it (remove it, or set XDG_RUNTIME_DIR to a "
                                "private folder)")
    return folder


def _base() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        try:
            check_private(runtime)
            return Path(runtime) / "torchmark"
        except (OSError, UnsafeFolderError):
            pass  # a stale or shared setting: the temporary folder instead
    return Path(tempfile.gettempdir()) / f"torchmark-{os.getuid()}"


def private_folder() -> Path:
    """This user's private torchmark folder, made (0700) if missing and always checked."""
    folder = _base()
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    return check_private(folder)


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a connected unix socket (Linux)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]
