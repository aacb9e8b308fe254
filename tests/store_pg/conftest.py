"""A real PostgreSQL server for the PostgreSQL run-store tests.

One server per pytest process (each pytest-xdist worker starts its own, in its own
folder, listening only on a unix socket there), one fresh database per test. The server
binaries are the distribution's (``/usr/lib/postgresql/*/bin``, else ``pg_config
--bindir``, else ``initdb`` on PATH). PostgreSQL refuses to run as root: as root the server
runs as the ``postgres`` user. Where no server can be started the tests are skipped,
saying why; in CI (``CI`` set) they fail instead (``.ci/run`` installs the server).
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.conftest import skip_unless_ci


@dataclass
class Server:
    socket_dir: Path
    port: int = 5432

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@/{db}?host={self.socket_dir}&port={self.port}"


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if found:
        return Path(found[-1]).parent
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").exists():
            return Path(out.stdout.strip())
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _version(path: str) -> int:
    part = Path(path).parent.parent.name
    return int(part) if part.isdigit() else 0


def _as_server_user(argv: list[str]) -> list[str]:
    """``argv`` run as the ``postgres`` user when this process is root."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "postgres", "--", *argv]


def _start(root: Path) -> tuple[Server | None, str]:
    """Start a server in ``root``; (server, "") or (None, why not)."""
    bindir = _bindir()
    if bindir is None:
        return None, "no PostgreSQL server binaries (initdb) found; install postgresql"
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return None, "running as root without runuser: cannot start PostgreSQL"
        try:
            shutil.chown(root, user="postgres")
        except (LookupError, OSError) as exc:
            return None, f"running as root and no usable 'postgres' user: {exc}"
    data = root / "data"
    init = subprocess.run(
        _as_server_user(
            [str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]
            + ["-E", "UTF8", "--no-sync", "--no-instructions"]
        ),
        capture_output=True,
        text=True,
    )
    if init.returncode != 0:
        return None, f"initdb failed: {init.stderr.strip()[-500:]}"
    options = f"-k {root} -c listen_addresses='' -c fsync=off -c max_connections=60"
    start = subprocess.run(
        _as_server_user(
            [str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log")]
            + ["-w", "-t", "60", "start"]
        ),
        capture_output=True,
        text=True,
    )
    if start.returncode != 0:
        log = (root / "log").read_text() if (root / "log").exists() else start.stderr
        return None, f"pg_ctl start failed: {log.strip()[-500:]}"
    return Server(root), ""


@pytest.fixture(scope="session")
def pg_server() -> Iterator[tuple[Server | None, str]]:
    """This pytest process's server (or why there is none), stopped and removed at exit.

    The folder is short and under /tmp: a unix socket path must fit in 107 bytes.
    """
    root = Path(tempfile.mkdtemp(prefix="prereg-pg-", dir="/tmp"))
    os.chmod(root, 0o755)
    server, why = _start(root)
    try:
        yield server, why
    finally:
        if server is not None:
            bindir = _bindir()
            assert bindir is not None
            subprocess.run(
                _as_server_user(
                    [str(bindir / "pg_ctl"), "-D", str(root / "data"), "-m", "immediate", "stop"]
                ),
                capture_output=True,
            )
        shutil.rmtree(root, ignore_errors=True)


_schemas = itertools.count()


@pytest.fixture
def pg_url(pg_server: tuple[Server | None, str]) -> Iterator[str]:
    """The URL of a new, empty schema of the server's database (the store's tables go
    there through ``search_path``, as a deployment may put one team's store in its own
    schema); dropped after the test. A schema is made in milliseconds, a database not."""
    server, why = pg_server
    if server is None:
        skip_unless_ci(f"no PostgreSQL server: {why}")
    assert server is not None
    name = f"t{next(_schemas)}"
    with psycopg.connect(server.url(), autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{name}"')  # type: ignore[arg-type]
    try:
        yield server.url() + f"&options=-csearch_path%3D{name}"
    finally:
        with psycopg.connect(server.url(), autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{name}" CASCADE')  # type: ignore[arg-type]


def backend_pid(url: str) -> int:
    """A fresh session's server process id (to watch for its end)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.info.backend_pid)


def wait_for_session_end(url: str, pid: int) -> None:
    """Until the server process ``pid`` is gone (a closed or killed client's session ends
    a moment after its connection closes)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(6000):
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
            found = row.fetchone()
            if found is not None and found[0] == 0:
                return
            time.sleep(0.01)
    raise AssertionError(f"the session of server process {pid} did not end")
