"""A real throw-away PostgreSQL cluster for the store's tests: started once a session in a
temporary folder on a free loopback port, as the postgres system user when the tests run
as root (PostgreSQL refuses root); the fixtures (tests/conftest.py) skip, with the reason,
where the server binaries or psycopg are missing."""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresCluster:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="torchmark-pg-"))
        self.port = _free_port()
        self.as_user: list[str] = []
        if os.getuid() == 0:  # PostgreSQL refuses to run as root
            shutil.chown(self.folder, "postgres", "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        data = self.folder / "data"
        self._run(pg_bin("initdb"), "-D", str(data), "-U", "torchmark", "--auth=trust",
                  "-E", "UTF8", "--no-instructions")
        self._run(pg_bin("pg_ctl"), "-D", str(data), "-l", str(self.folder / "log"), "-w",
                  "-o", f"-p {self.port} -k {self.folder} -h 127.0.0.1 -c fsync=off",
                  "start")
        self.data = data
        self._names = itertools.count()

    def _run(self, *argv: str | None) -> None:
        subprocess.run([*self.as_user, *argv], check=True, capture_output=True, timeout=120)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://torchmark@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=torchmark "
                             "dbname=postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
