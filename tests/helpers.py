"""Helpers for tests: scripts in child interpreters."""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn

import pytest

if TYPE_CHECKING:
    from preloaded import Child, Preloaded

    from letitloop import Journal
    from letitloop.stores.sqlite.store import Store


def write_script(folder: Path, name: str, source: str) -> Path:
    """Write a dedented Python script into ``folder`` and return its path."""
    path = folder / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


#: For a pytest that a test starts: the installed plugins it does without. None of the
#: projects the tests run in one uses them, and they cost each pytest process about 3 s
#: of CPU before it collects (LangSmith's alone about 1.5 s); letitloop's own plugin still
#: loads through its entry point.
UNUSED_PYTEST_PLUGINS = ("-p", "no:langsmith_plugin", "-p", "no:anyio", "-p", "no:hypothesispytest")


#: The checkout: benchmark scripts run from here, as their docs say.
CHECKOUT = Path(__file__).resolve().parent.parent


#: The programs :func:`program_file` wrote, by their text, and the folder they are in.
_PROGRAMS: dict[str, Path] = {}
_PROGRAMS_FOLDER: list[Path] = []


def program_file(source: str) -> Path:
    """``source`` (a program a test would run with ``python -c``) as a script file, written
    once per test process (removed at its exit), for :func:`run_forked` and
    :func:`start_forked`, which run a file."""
    if source not in _PROGRAMS:
        if not _PROGRAMS_FOLDER:
            _PROGRAMS_FOLDER.append(Path(tempfile.mkdtemp(prefix="letitloop-programs-")))
            atexit.register(shutil.rmtree, _PROGRAMS_FOLDER[0], True)
        path = _PROGRAMS_FOLDER[0] / f"program{len(_PROGRAMS)}.py"
        path.write_text(source, encoding="utf-8")
        _PROGRAMS[source] = path
    return _PROGRAMS[source]


def run_benchmark(script: str, *args: str, header_words: tuple[str, ...] = ()) -> str:
    """Run ``benchmarks/<script>`` from the checkout and return what it printed.

    Checks that it exited 0 and that its first line names letitloop, Python
    and SQLite (every report opens with the versions), and ``header_words``.
    """
    done = subprocess.run(
        [sys.executable, f"benchmarks/{script}", *args],
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0]
    for word in ("letitloop", "Python", "SQLite", *header_words):
        assert word in header, header
    return done.stdout


def run_python(
    script: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter to completion, capturing its output."""
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def in_fresh_interpreter(module: str, function: str, *args: str, timeout: float = 100) -> Any:
    """``function(*args)`` of ``module`` (a test module or helper on this process's path),
    called in a fresh interpreter that imports only that module and what it imports: what
    it returned, through JSON (its output's last line).

    For a test that forks a hundred children or more: forked from a pytest worker that
    imported every framework of the suite, a child costs about twice the CPU (the
    worker's page tables are copied at each fork and dropped at each exit).
    """
    code = (
        "import importlib, json, sys\n"
        f"found = getattr(importlib.import_module({module!r}), {function!r})(*sys.argv[1:])\n"
        "print(json.dumps(found))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    sys.stderr.write(done.stderr)  # shown by pytest if the test fails (a hung child's stack)
    return json.loads(done.stdout.splitlines()[-1])


def spawn_python(
    script: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start ``script`` in a fresh interpreter with a line-buffered stdout pipe."""
    return subprocess.Popen(
        [sys.executable, "-u", str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def in_mount_namespace(shell: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``shell`` as root in a private mount namespace (mounts vanish with it).

    Skips the test (one line) where that is not permitted: not root, no
    unshare(1), or a sandbox that refuses new mount namespaces.
    """
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a read-only or tiny filesystem")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m is not permitted here: {probe.stderr.decode().strip()}")
    return subprocess.run(
        ["unshare", "-m", "sh", "-ec", shell],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def descriptors_on(path: Path, pid: int | str = "self") -> int:
    """How many open descriptors of process ``pid`` name ``path`` (Linux: /proc/PID/fd).

    A journal waiting for a run's holder keeps the run's lock file open
    while it polls for the lock, so one more descriptor on the lock file is
    the handshake a test needs: the waiter has reached the lock, whatever the
    machine's speed. A lock file unlinked meanwhile still counts.
    """
    target = os.path.realpath(path)
    count = 0
    folder = f"/proc/{pid}/fd"
    for fd in os.listdir(folder):
        try:
            link = os.readlink(os.path.join(folder, fd))
        except OSError:  # closed meanwhile
            continue
        if link.removesuffix(" (deleted)") == target:
            count += 1
    return count


def left_on_terminal(leader: int) -> list[bytes]:
    """What a pseudo-terminal's ``leader`` still holds, read without waiting: for a loop
    that stops reading once its child ended (``poll()``), which the child may have done
    after writing its last output and before the loop looked, between a ``select`` that
    found nothing and the ``poll``."""
    import select

    chunks = []
    while select.select([leader], [], [], 0)[0]:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer closed the terminal, nothing is left
            break
        if not chunk:
            break
        chunks.append(chunk)
    return chunks


def wait_until(done: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``done()`` every 10 ms until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting until {what}")
        time.sleep(0.01)


#: Whether /proc/PID/fd can be read (the handshake of :func:`descriptors_on`).
HAS_PROC_FD = os.path.isdir("/proc/self/fd")


def forked_exit_code(child: Callable[[], int], timeout: float = 20.0) -> int | None:
    """Fork; the child runs ``child()`` and leaves with its status through ``os._exit``
    (1 if it raised). The child's exit code, or None when it was still running after
    ``timeout`` seconds (it hung: it is SIGKILLed and reaped)."""
    return forked_exit_codes([child], timeout, at_once=1)[0]


def forked_exit_codes(
    children: Sequence[Callable[[], int]], timeout: float = 20.0, at_once: int = 8
) -> list[int | None]:
    """:func:`forked_exit_code` for each of ``children``, forked in their order with up to
    ``at_once`` of them running together: their exit codes in that order (None: hung).

    A child mostly waits (for the disk); forking the next ones meanwhile, from the
    same parent in the same state, costs the parent nothing, so a test that forks
    a hundred does not wait for each in turn. ``timeout`` counts from each child's fork.
    """
    codes: list[int | None] = [None] * len(children)
    running: dict[int, tuple[int, float]] = {}  # pid: (its index, its deadline)
    waiting = list(enumerate(children))[::-1]
    dumps = tempfile.mkdtemp(prefix="letitloop-hung-")  # where each child would say it waits
    try:
        while waiting or running:
            while waiting and len(running) < at_once:
                i, child = waiting.pop()
                pid = os.fork()
                if pid == 0:  # the child
                    _run_child(child, Path(dumps, str(i)), timeout)
                running[pid] = (i, time.monotonic() + timeout)
            for pid, (i, deadline) in list(running.items()):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    codes[i] = os.waitstatus_to_exitcode(status)
                    del running[pid]
                elif time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    del running[pid]
                    stacks = Path(dumps, str(i)).read_text()
                    print(f"child {i} hung; where it waited:\n{stacks}", file=sys.stderr)
            if running and not (waiting and len(running) < at_once):
                _until_one_exits(list(running), min(d for _, d in running.values()))
    finally:
        shutil.rmtree(dumps, ignore_errors=True)
    return codes


def _run_child(child: Callable[[], int], stacks: Path, timeout: float) -> NoReturn:
    """In a forked child: ``child()``, then out with its exit code (1 if it raised). Should
    it hang, ``faulthandler`` writes its stack to ``stacks`` before the parent kills it."""
    status = 1
    try:
        with stacks.open("w") as out:
            faulthandler.dump_traceback_later(timeout * 0.8, file=out)
            status = child()
    finally:
        os._exit(status)


def _until_one_exits(pids: list[int], deadline: float) -> None:
    """Sleep until one of the child processes ``pids`` exits or ``deadline`` passes.

    Linux: wakes when a child exits (a pidfd each, waited on outside the GIL, so a
    busy thread of the parent does not delay the wake-up); elsewhere: a 2 ms nap.
    """
    if not hasattr(os, "pidfd_open"):
        time.sleep(0.002)
        return
    import select

    fds = []
    try:
        for pid in pids:
            fds.append(os.pidfd_open(pid))
        select.select(fds, [], [], max(0.0, deadline - time.monotonic()))
    except ProcessLookupError:  # already reaped: the caller's next look finds it
        pass
    finally:
        for fd in fds:
            os.close(fd)


def sqlite_store(j: Journal) -> Store:
    """The SQLite connection of an open journal on a journal file (its storage's ``store``)."""
    from letitloop.stores.sqlite.storage import SqliteStorage

    storage = j.store
    assert isinstance(storage, SqliteStorage), storage
    return storage.store


def lil_in_process(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``lil ARGS`` called in this process through click's ``CliRunner``, as the
    ``CompletedProcess`` a subprocess gives (its exit status, stdout and stderr apart).

    For a test of how ``lil`` reads its arguments (an option's place, a value out of
    range, shell completion), where a fresh interpreter proves nothing more and costs
    about 0.15 s of CPU a call. Anything ``lil`` raises propagates (a traceback fails
    the test); the journals it opened are closed before it returns.
    """
    from click.testing import CliRunner

    from letitloop.cli import cli
    from letitloop.stores.sqlite.pool import close_idle_stores

    try:
        result = CliRunner().invoke(
            cli, list(args), prog_name="lil", env=env, catch_exceptions=False
        )
    finally:
        close_idle_stores()
    return subprocess.CompletedProcess(
        ["lil", *args], result.exit_code, result.stdout, result.stderr
    )


#: This process's forking interpreters that imported letitloop (:func:`run_forked`), by
#: the modules they imported besides (``preload``), each started on first use, stopped by
#: :func:`stop_forker` (conftest, at the session's end).
_forkers: dict[tuple[str, ...], Preloaded] = {}
_forker_free = threading.Lock()

#: What a child that opens a journal on PostgreSQL imports besides (about 80 ms of CPU a
#: child): a ``preload`` for :func:`run_forked` and the others.
POSTGRES = ("psycopg", "letitloop.stores.postgres.storage")


def preload_for(location: str | Path) -> tuple[str, ...]:
    """The ``preload`` of a child that opens the journal at ``location`` (a file or a URL)."""
    return POSTGRES if str(location).startswith("postgresql") else ()


def _forker(preload: tuple[str, ...]) -> Preloaded:
    """The forking interpreter that imported letitloop, ``lil``'s commands and ``preload``
    (the caller holds ``_forker_free``)."""
    if preload not in _forkers:
        from preloaded import Preloaded

        _forkers[preload] = Preloaded("letitloop", "letitloop.cli", *preload, with_letitloop=True)
    return _forkers[preload]


#: ``python -m letitloop`` as a script, for :func:`lil_forked`.
LIL_ENTRY = Path(__file__).with_name("lil_entry.py")


def run_forked(
    script: Path,
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    preload: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """``python script args`` run to its end in a child forked from this test process's
    one interpreter that imported letitloop (and ``lil``'s commands, for
    :func:`lil_forked`: about 20 ms of CPU a child) and opened nothing (tests/preloaded.py): a
    process of its own to letitloop (its own pid, its own connections, killable by
    SIGKILL, its exit status as its parent sees it), in the folder ``cwd`` (this one's
    by default) with the environment ``env`` (this one's by default), stdin empty.

    A fresh interpreter spends about 0.1 s of CPU importing letitloop; a forked child
    a tenth of that. A fresh interpreter is started instead while another thread's
    child runs (children meant to run together still do), and when ``env`` changes a
    ``PYTHON…`` variable (read when an interpreter starts: the hash seed, the path).
    ``preload``: modules the forking interpreter imports besides (:data:`POSTGRES`), so
    that each child does not.
    """
    env = dict(os.environ if env is None else env)
    python_vars = {k: v for k, v in env.items() if k.startswith("PYTHON")}
    same_start = python_vars == {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}
    if not same_start or not _forker_free.acquire(blocking=False):
        return subprocess.run(
            [sys.executable, str(script), *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    try:
        return _forker(preload).run(script, *args, cwd=cwd, env=env)
    except BaseException:  # a timeout inside the wait: the next call gets a new forker
        stop_forker()
        raise
    finally:
        _forker_free.release()


def start_forked(
    script: Path,
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    preload: tuple[str, ...] = (),
) -> Child:
    """``python -u script args`` started as :func:`run_forked` runs it (forked from this
    test process's interpreter that imported letitloop) and left running: its pid (to
    signal or SIGKILL), what it printed so far (``printed()``), and its end (``wait()``,
    the ``CompletedProcess``). The test waits for it or kills it before it ends.

    For a child that runs beside the test (a holder, a waiter), where its being a fresh
    interpreter is not what the test checks: about a tenth of a fresh one's CPU.
    """
    env = dict(os.environ if env is None else env)
    python_vars = {k: v for k, v in env.items() if k.startswith("PYTHON")}
    assert python_vars == {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}, (
        "a PYTHON... variable changed: a forked child would not read it"
    )
    with _forker_free:
        return _forker(preload).start(script, *args, cwd=cwd, env=env)


def forker() -> Preloaded:
    """A handle (``with``: closed) on the interpreter :func:`run_forked` forks from (letitloop
    and ``lil``'s commands imported), for a test that starts its children and watches them
    (reads what they print, SIGKILLs them): no interpreter of its own to start."""
    with _forker_free:
        return _forker(()).sibling()


def lil_forked(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    preload: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """``python -m letitloop ARGS`` (``lil``) run as :func:`run_forked` runs a script: for
    a test of what ``lil`` prints and writes, where the entry point's process start is
    not what it checks (tests that run the installed ``lil`` keep that proven)."""
    return run_forked(LIL_ENTRY, *args, cwd=cwd, env=env, preload=preload)


class ForkedProcess:
    """A child started by :func:`spawn_forked`, used as the ``subprocess.Popen`` (text mode,
    stdout and stderr piped) it stands for: ``pid``, ``args``, ``returncode``, ``poll``,
    ``wait``, ``communicate``, ``kill``, ``terminate``, ``send_signal``, and ``stdout`` and
    ``stderr`` read line by line as it writes them (``readline``, iteration, ``read``)."""

    def __init__(self, child: Child) -> None:
        self.child, self.pid, self.args = child, child.pid, child.args
        self.returncode: int | None = None
        # Read handles of their own: the files' text outlives the child's wait.
        self.stdout = _Output(open(child.out.name, "rb"), self)  # noqa: SIM115
        self.stderr = _Output(open(child.err.name, "rb"), self)  # noqa: SIM115

    def poll(self) -> int | None:
        if self.returncode is None and not self.child.running():
            self.returncode = self.child.wait().returncode
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            _until_one_exits([self.pid], min(deadline or math.inf, time.monotonic() + 1))
        return self.returncode  # type: ignore[return-value]

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return self.stdout.read(), self.stderr.read()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def __enter__(self) -> ForkedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.poll() is None:
            self.kill()
        self.wait()
        self.stdout.close()
        self.stderr.close()


class _Output:
    """What a :class:`ForkedProcess` writes to one of its files, read as a pipe reads: a line
    once it is whole (or the child ended), everything once the child ended."""

    def __init__(self, file: BinaryIO, process: ForkedProcess) -> None:
        self.file, self.process, self.pending = file, process, b""

    def readline(self) -> str:
        while b"\n" not in self.pending:
            chunk = self.file.read()
            if chunk:
                self.pending += chunk
                continue
            if self.process.poll() is not None:
                self.pending += self.file.read()
                break
            time.sleep(0.005)
        line, sep, self.pending = self.pending.partition(b"\n")
        return str((line + sep).decode("utf-8", errors="replace"))

    def __iter__(self) -> Iterator[str]:
        while line := self.readline():
            yield line

    def read(self) -> str:
        self.process.wait()
        rest: bytes = self.pending + self.file.read()
        self.pending = b""
        return rest.decode("utf-8", errors="replace")

    def close(self) -> None:
        self.file.close()


def first_line(child: Child, timeout: float = 30.0) -> str:
    """The first line a child of a :class:`Preloaded` printed (unbuffered), without its end,
    once it printed it; what it printed when it ended first."""
    wait_until(lambda: "\n" in child.printed() or not child.running(), "a line", timeout)
    return child.printed().split("\n", 1)[0]


def spawn_forked(
    script: Path, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> ForkedProcess:
    """``python -u script args`` started as :func:`spawn_python` starts it (``env``: variables
    added to this process's; its stdout and stderr read as it writes them), in a child
    forked from :func:`run_forked`'s interpreter: for a test that watches a program run
    (reads its lines, signals it, SIGKILLs it) where a fresh interpreter's start is not
    what it checks. A ``PYTHON…`` variable (read as an interpreter starts) needs
    :func:`spawn_python`; so does a program whose forked worker must close a pipe of its
    output (its files here have no end to wait for)."""
    env = {**os.environ, **(env or {})}
    python_vars = {k: v for k, v in env.items() if k.startswith("PYTHON")}
    if python_vars != {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}:
        raise ValueError("a PYTHON… variable changes at an interpreter's start: spawn_python")
    with _forker_free:
        return ForkedProcess(_forker(()).start(script, *args, cwd=cwd, env=env))


def stop_forker() -> None:
    """Stop :func:`run_forked`'s forking interpreters, those that were started, and every
    other forking interpreter of this process kept idle (tests/preloaded.py)."""
    while _forkers:
        _forkers.popitem()[1].close()
    if "preloaded" in sys.modules:
        sys.modules["preloaded"].stop_idle()
