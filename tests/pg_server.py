"""A throwaway PostgreSQL server for the tests: one per test process, a schema per test.

``location()`` starts the server the first time it is called (``initdb`` and
``pg_ctl`` in a temporary folder, on a free port, listening only on a Unix
socket in that folder; as the ``postgres`` user when the tests run as root)
and stops it when the process exits, even after a failure. Each call makes a
fresh schema and returns a ``postgresql://`` URL whose ``search_path`` is
that schema, so every test has its own tables on the one server.

When PostgreSQL (or psycopg) is absent the calling test is skipped with one
line; under CI (``CI`` set) it fails instead: CI never skips them.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

#: Where Debian's postgresql package puts its programs (not on PATH), newest first.
_BIN_DIRS = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)

_lock = threading.Lock()
_server: dict[str, str] = {}
_control: list[Callable[[str], None]] = []


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found is not None:
        return found
    for d in _BIN_DIRS:
        if os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    return None


def _absent(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL tests cannot run in CI: {why}")
    pytest.skip(f"PostgreSQL is absent here ({why}); CI runs these tests")


def _as_server_user(args: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return args
    return ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(f"'{a}'" for a in args)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start() -> str:
    initdb, pg_ctl = _tool("initdb"), _tool("pg_ctl")
    if initdb is None or pg_ctl is None:
        _absent("no initdb/pg_ctl; apt-get install postgresql")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _absent("psycopg is not installed; pip install -e '.[postgres]'")
    assert initdb is not None and pg_ctl is not None
    home = Path(tempfile.mkdtemp(prefix="letitloop-pg-"))
    if os.geteuid() == 0:
        shutil.chown(home, "postgres")
    data, port = home / "data", _free_port()
    subprocess.run(
        _as_server_user([initdb, "-D", str(data), "-A", "trust", "--no-sync", "-U", "postgres"]),
        check=True,
        capture_output=True,
    )
    # Its dynamic shared memory in its data folder (removed with it), not in /dev/shm,
    # where an immediate stop (a crash, as the tests stop it) leaves its segments behind.
    options = (
        f"-p {port} -k {home} -c listen_addresses= -c fsync=off -c max_connections=200"
        " -c dynamic_shared_memory_type=mmap"
    )
    subprocess.run(
        _as_server_user(
            [pg_ctl, "-D", str(data), "-o", options, "-l", str(home / "log"), "-w", "start"]
        ),
        check=True,
        capture_output=True,
    )

    def stop() -> None:
        subprocess.run(
            _as_server_user([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(home, ignore_errors=True)

    def control(action: str) -> None:
        args = [pg_ctl, "-D", str(data), "-w", action]
        if action == "stop":
            args[3:3] = ["-m", "immediate"]
        else:
            args[3:3] = ["-o", options, "-l", str(home / "log")]
        subprocess.run(_as_server_user(args), check=True, capture_output=True)

    _control.append(control)
    atexit.register(stop)
    _server.update(home=str(home), port=str(port))
    return f"postgresql://postgres@/postgres?host={quote(str(home))}&port={port}"


def server_url() -> str:
    """The URL of the process's server (started on first use), its default schema."""
    with _lock:
        if "url" not in _server:
            _server["url"] = _start()
        return _server["url"]


def log_path() -> Path:
    """The server's log file (what ``log_statement`` writes, for a test that reads it)."""
    server_url()
    return Path(_server["home"]) / "log"


def location() -> str:
    """A URL of the server whose tables live in a fresh schema of their own."""
    import psycopg

    url = server_url()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{url}&options={quote(f'-csearch_path={schema}')}"


def crash_and_restart(between: Callable[[], None]) -> None:
    """Stop the server as a crash would (``pg_ctl stop -m immediate``), call ``between``,
    start it again (even when ``between`` failed)."""
    server_url()
    control = _control[0]
    control("stop")
    try:
        between()
    finally:
        control("start")


def lil(location: str, *args: str) -> str:
    """``lil --db location ARGS…`` run in a child process (helpers.lil_forked); its output
    (it must succeed)."""
    from helpers import POSTGRES, lil_forked

    done = lil_forked("--db", location, *args, preload=POSTGRES)
    assert done.returncode == 0, done.stderr
    return done.stdout


def round_trips(conn: Any, work: Callable[[], object]) -> int:
    """How many round trips ``work`` makes on ``conn`` (a psycopg connection), counted on
    the wire: libpq's trace has one ``Sync`` (or ``Query``) message from the client each."""
    with tempfile.TemporaryFile("w+") as trace:
        conn.pgconn.trace(trace.fileno())
        try:
            work()
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        return sum(
            1
            for line in trace
            if line.split("\t")[1:2] == ["F"] and line.split("\t")[3].strip() in ("Sync", "Query")
        )
