"""Shared fixtures: real journal files in temporary folders, real child interpreters."""

from __future__ import annotations

import ast
import functools
import gc
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crewai_beside
import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Compile the package and the tests' helper modules to bytecode once, before the
    workers start: the suite starts a few thousand Python children, and where the
    environment sets PYTHONDONTWRITEBYTECODE (as this machine's does) no child writes
    the bytecode it compiles, so each one compiled letitloop again (about 50 ms of CPU
    a child; a user's install has the bytecode). py_compile writes it whatever the flag."""
    _hear_ctrl_c()
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        gc.disable()  # a process that collects: see pytest_collection_finish
    if hasattr(config, "workerinput"):  # an xdist worker: the controller did it
        return
    _temporary_files_in_memory(config)
    import compileall

    root = Path(__file__).resolve().parent.parent
    for folder in ("letitloop", "tests", "examples", "benchmarks"):
        compileall.compile_dir(root / folder, quiet=1, workers=0)
    _rewrite_test_modules(config, root / "tests")
    crewai_beside.start_if_whole(config)


#: Free memory /dev/shm must have for the suite's temporary files to go there: a whole
#: run leaves about 0.7 GB of them (the previous run's are removed at the start).
MEMORY_FOR_TEMPORARY_FILES = 4 << 30


def _temporary_files_in_memory(config: pytest.Config) -> None:
    """Put the temporary files of this run and of every process it starts (``TMPDIR``: the
    tests' folders, the journals, the children's output files) in memory, in a folder of
    Linux's /dev/shm (tmpfs), unless ``TMPDIR`` or ``--basetemp`` says where, or /dev/shm
    is absent, not executable or has less than :data:`MEMORY_FOR_TEMPORARY_FILES` free.

    The suite creates and deletes some hundred thousand files, most of them journals
    written with fsync: on ext4 the kernel's bookkeeping of them (finding a free inode
    past the recently deleted ones, its journal) cost about 13 s of CPU a run, which
    tmpfs does not spend (whole suite on 2 cores: 530 s of CPU in 307 s of wall against
    545-586 s in 317-339 s on disk, one run each, 2026-12-07). What the tests prove holds
    there: a SIGKILL loses nothing of a file's page cache on either, and no test can cut
    the power. Only the last run's folder is kept, as the memory it holds is the machine's.
    """
    if os.environ.get("TMPDIR") or config.option.basetemp or sys.platform != "linux":
        return
    shm = Path("/dev/shm")
    try:
        free = os.statvfs(shm)
    except OSError:
        return
    if free.f_flag & os.ST_NOEXEC or free.f_bavail * free.f_frsize < MEMORY_FOR_TEMPORARY_FILES:
        return
    folder = shm / f"letitloop-tests-{os.getuid()}"
    try:
        folder.mkdir(exist_ok=True)
        if folder.stat().st_uid != os.getuid():
            return
        # Others may pass through, not list: the PostgreSQL server's user reaches its own
        # folder in it (tests/pg_server.py); what is in it is made private (mkdtemp, pytest's).
        folder.chmod(0o711)
    except OSError:
        return
    for earlier in folder.glob("pytest-of-*/pytest-*"):
        if earlier.is_dir() and not earlier.is_symlink() and not _in_use(earlier):
            shutil.rmtree(earlier, ignore_errors=True)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # the next tempfile.gettempdir() reads TMPDIR again


def _in_use(basetemp: Path) -> bool:
    """Whether a pytest run still uses its folder ``basetemp``: pytest writes its pid to the
    folder's ``.lock`` as it makes the folder and removes the file at its end."""
    try:
        os.kill(int((basetemp / ".lock").read_text()), 0)
    except (OSError, ValueError):
        return False
    return True


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        crewai_beside.stop_if_running()


def _hear_ctrl_c() -> None:
    """Give this process, and so every child it starts, the default Ctrl-C (SIGINT).

    A suite started in the background of a shell without job control (``pytest &`` in a
    script) inherits SIGINT ignored, and so does every child it starts: a child Python
    then never raises KeyboardInterrupt. Tests that send a child SIGINT, as a user's
    Ctrl-C, saw it run on (a step waiting forever; ``lil show --follow`` following a run
    to its end), but only in a worker where no earlier test had put a handler back."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Fail a test that left SIGINT ignored or blocked here: every child started after it
    would ignore a Ctrl-C too (see :func:`_hear_ctrl_c`), failing tests far from it."""
    import signal

    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, ())
    if ignored or blocked:
        _hear_ctrl_c()
        pytest.fail(f"the test left SIGINT {'ignored' if ignored else 'blocked'} in this process")


def _rewrite_test_modules(config: pytest.Config, tests: Path) -> None:
    """Write pytest's cached test modules (their asserts rewritten) once, before the workers
    start, as pytest writes them where bytecode may be written: the workers then read them.

    Under PYTHONDONTWRITEBYTECODE pytest rewrites every test module it imports and keeps
    none: each worker rewrote the whole suite's again (about 3.4 s of CPU a worker, a
    third of its collection). The quick check's leave out :data:`SLOW_FILES`, which it
    does not import. A pytest whose internals moved gets no cache (and loses nothing)."""
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        tail, read, write, make = (
            rewrite.PYC_TAIL, rewrite._read_pyc, rewrite._write_pyc, rewrite._rewrite_test
        )  # fmt: skip
    except (ImportError, AttributeError, KeyError):
        return
    quick = config.option.markexpr == "not slow"
    for source in [*sorted(tests.glob("test_*.py")), tests / "conftest.py"]:
        if quick and source.name in SLOW_FILES:
            continue
        pyc = rewrite.get_cache_dir(source) / (source.name[:-3] + tail)
        if read(source, pyc) is not None:
            continue
        if not rewrite.try_makedirs(pyc.parent):
            return
        source_hash, code = make(source, config)
        write(state, code, source_hash, pyc)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Collected (every test module imported, and with them the frameworks: about 10 s of
    CPU a worker), freeze what the imports made (``gc.freeze``) and turn the collector back
    on. The collector was off meanwhile (pytest_configure): a full collection walked every
    object the imports had made so far, again and again as they grew (a fifth of an
    import's CPU). Frozen, they are out of the collector's sight for the session: each
    full collection while the tests run, and pytest's own at the session's end, walks
    only what the tests made, and a child forked from the worker copies no page for it."""
    gc.collect()
    gc.freeze()
    gc.enable()


#: The files of the full suite that the quick check (``python -m pytest -m "not slow"``,
#: docs/testing.md) leaves out, each ``slow`` as a whole: the frameworks' adapters
#: against the real frameworks, the browser, PostgreSQL, the MCP SDK's servers, the
#: web view, the benchmarks' smoke runs, the files that kill hundreds of children or
#: start a pytest or a virtual environment a test, and the CLI files that run ``lil``
#: as a process a test. A single slow test elsewhere says ``@pytest.mark.slow``.
#: README's test command and .ci/run run everything.
SLOW_FILES = frozenset(
    {
        # The frameworks, the MCP SDK, OpenTelemetry's SDK, lil ui and the browser.
        "test_autogen.py", "test_crewai.py", "test_dspy.py", "test_llamaindex.py",
        "test_langgraph.py", "test_langgraph_connections.py", "test_langgraph_files.py",
        "test_langgraph_forgetful.py", "test_langgraph_identity.py", "test_langgraph_kill.py",
        "test_langgraph_messages.py", "test_langgraph_polled.py", "test_langgraph_serde.py",
        "test_langgraph_subgraphs.py", "test_mcp_calls.py", "test_mcp_server.py",
        "test_openai_agents.py", "test_otel.py", "test_pydantic_ai.py",
        "test_pydantic_ai_mcp.py", "test_pydantic_ai_streams.py", "test_pydantic_ai_waits.py",
        "test_smolagents.py", "test_web.py", "test_web_browser.py", "test_web_background.py",
        "test_web_fastapi.py", "test_web_streams.py",
        # PostgreSQL: a server of their own.
        "test_postgres.py", "test_postgres_lil.py", "test_postgres_seals.py", "test_gc_race.py",
        "test_sealed_replay.py",
        # The benchmarks' smoke runs.
        "test_codec_benchmark.py", "test_crash_benchmark.py", "test_disk_benchmark.py",
        "test_resume_benchmark.py", "test_row_options_benchmark.py", "test_web_benchmark.py",
        "test_queue_vs_dbos_benchmark.py",
        "test_replay_memory.py",
        # Round 5: failures kept in the history (processes, lil, PostgreSQL).
        "test_failure_history.py", "test_mutants.py",
        # Kills and forks by the hundred, processes and threads hammering one file,
        # damaged files opened by child processes; pytest processes of their own.
        "test_crash_recovery.py", "test_primitives_crash.py", "test_forked_child.py",
        "test_queue_kill.py", "test_queue_tools.py", "test_crashtest.py",
        "test_crashtest_examples.py",
        "test_connections.py", "test_checksums.py", "test_hostile_input.py",
        "test_pytest_plugin.py", "test_example_replay.py",
        # lil as a process in almost every test (lil watch restarting killed children,
        # lil check, diff, rekey, cancel, send, fixture), README's and the docs' programs
        # as pasted, programs killed between attempts (versions, costs, seals).
        "test_cli.py", "test_cli_agree.py", "test_cli_live.py", "test_cli_hostile.py",
        "test_lil_wording.py", "test_supervisor.py", "test_deploycheck.py", "test_diff.py",
        "test_rekey.py", "test_cancel.py", "test_waits.py", "test_discovery.py",
        "test_readme.py", "test_seals.py", "test_versions.py", "test_fixtures.py",
        "test_costs.py",
        # Schedulers as lil processes: six racing on a file and on PostgreSQL, killed, stopped.
        "test_schedule_processes.py",
        # Streamed calls: programs SIGKILLed mid-stream and run again, file and PostgreSQL.
        "test_streams_killed.py",
        # The frameworks' streams (Pydantic AI, OpenAI Agents, LangGraph) killed mid-answer.
        "test_pydantic_ai_token_streams.py", "test_openai_agents_streams.py",
        "test_langgraph_streams.py",
        # The encryption extra (cryptography), its programs and lil as processes.
        "test_encryption.py",
        # Round 4: the adapters' request trials (killed at random, twenty times a
        # scenario), the provider's bill under kills, lil copy to and from PostgreSQL,
        # every lil command on a FIFO, PostgreSQL's edges, lil ui's Host checks.
        "test_agent_requests.py", "test_bills.py", "test_copy.py", "test_streams_copied.py",
        "test_langgraph_requests.py", "test_llamaindex_agents.py", "test_mcp_echo.py",
        "test_newer_file_refused.py", "test_not_a_file.py", "test_openai_agents_approvals.py",
        "test_openai_agents_identity.py", "test_otel_secrets.py", "test_postgres_edges.py",
        "test_pydantic_ai_approvals.py", "test_pydantic_ai_identity.py", "test_web_hosts.py",
        # LangGraph's prebuilt agent, resume() and lil send answers, killed at random
        # (issues 48 and 49).
        "test_langgraph_answers.py", "test_langgraph_prebuilt.py", "test_langgraph_crashtest.py",
        # The golden journals: each adapter's program resumed in a process of its own.
        "test_golden.py",
        # CrewAI's tests in their own environment (tests/crewai_env.py), as one test.
        "test_crewai_env.py",
    }
)  # fmt: skip

#: The files whose units the xdist scheduler hands out after every other: CrewAI's test,
#: which waits for CrewAI's tests that the suite's first process started beside the
#: whole run (tests/crewai_beside.py), so that no worker waits before it has to.
LAST_FILES = ("test_crewai_env.py",)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m "not slow"`` exactly (the quick check), skip importing :data:`SLOW_FILES`:
    every test of theirs would be deselected, and importing them (the frameworks) costs
    each worker about 10 s of CPU. Otherwise pytest decides (None)."""
    if collection_path.name in SLOW_FILES and config.option.markexpr == "not slow":
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test of :data:`SLOW_FILES`, and every case whose parameter names
    PostgreSQL (a contract run there: a fresh schema migrated a test) or a framework's
    adapter (its import loads the framework: test_architecture's import of each module)."""
    slow = pytest.mark.slow
    for item in items:
        callspec = getattr(item, "callspec", None)
        named = callspec.id if callspec is not None else ""
        if item.path.name in SLOW_FILES or "postgres" in named or "adapters." in named:
            item.add_marker(slow)


@pytest.hookimpl(optionalhook=True)  # xdist's hook
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): for the full suite, two workers more than the
    cores this process may run on; for the quick check (``-m "not slow"`` exactly), one a
    core. The full suite's tests spend much of their time waiting (on child processes'
    start and their kill points, on fsync, on a watcher's backoff), and CrewAI's tests run
    beside them without a worker (tests/crewai_beside.py): on 2 cores, three workers kept
    them 161% busy (563 s of CPU in 350 s of wall), four 174% (542 s in 312 s, with the
    forkers on huge pages; 576 s in 330 s without; one run each, quiet machine, 20:00 on
    2026-12-07). The quick check's kept them about 78% busy (72 s of CPU in
    46 s), and a third worker cost it about 24 s more CPU (its own collection, and the
    tests' CPU time inflated by three processes on two cores: 84 -> 108 s, paired runs
    at load 5-8), more than it could win on an idle machine."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if config.option.markexpr == "not slow":
        return cores or 1
    return (cores or 1) + 2


@pytest.hookimpl(optionalhook=True)  # xdist's hook: absent where xdist is (CrewAI's env)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Spread the tests over the xdist workers one by one, except those that share.

    A test in a class goes with its class; the tests that use a module-scoped
    fixture (a chain of killed processes, a served app), directly or through
    another fixture of their file, go together with their classes, so such a
    fixture runs once; every test of a file that says ``# xdist: one worker``
    (its tests share module state) or has an autouse module-scoped fixture goes
    with its file. Any other test is handed to whichever worker is free, so one
    long file no longer keeps a worker busy while the other idles. (xdist's own
    ``loadgroup`` marks do not reach its scheduler under pytest 9, which names
    nodes from ``_id``.)

    The work goes out longest first: the units of :data:`SLOW_FILES` (those that
    share, by their number of tests, first: the kill trials' module fixtures), then
    the quick check's, so that the run ends on short tests that fill whichever
    worker is free, not on a minute-long unit that one worker starts while the
    other has nothing left. (xdist alone orders the units by their number of
    tests, then in file order: a 4-test unit of 20 s of trials went before a
    100-test unit of a second, and single heavy tests of test_web_browser.py or
    test_bills.py started last.) The units of :data:`LAST_FILES` go after all.
    """
    from collections import OrderedDict

    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    root = config.rootpath

    class Scheduling(LoadScopeScheduling):  # type: ignore[misc]
        ordered = False

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the first assignment: the queue is whole
                self.ordered = True
                queue: OrderedDict[str, dict[str, bool]] = self.workqueue
                for scope in [scope for scope in queue if not _slow(scope)]:
                    queue.move_to_end(scope)  # in their order, after the slow ones
                for scope in [scope for scope in queue if _last(scope)]:
                    queue.move_to_end(scope)
            super()._assign_work_unit(node)

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            sharing = _sharing(root / module)
            if sharing is None:
                return module
            name = nodeid.split("[", 1)[0]  # a parameter may hold "::"
            if name.split("::")[1] in sharing:
                return f"{module}::(module-scoped fixtures)"
            return name.rsplit("::", 1)[0] if name.count("::") > 1 else nodeid

    return Scheduling(config, log)


def _last(scope: str) -> bool:
    """Whether an xdist unit is of :data:`LAST_FILES`."""
    return scope.split("::", 1)[0].rsplit("/", 1)[-1] in LAST_FILES


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """CrewAI's closing lines (tests/test_crewai_env.py, its ``crewai_env`` property),
    after the main suite's, when it ran and passed (a failure prints its whole output)."""
    for report in terminalreporter.stats.get("passed", []):
        for name, value in getattr(report, "user_properties", ()):
            if name == "crewai_env" and report.when == "call":
                terminalreporter.write_sep("-", "CrewAI's tests, in .venvs/crewai")
                terminalreporter.write_line(str(value))


def _slow(scope: str) -> bool:
    """Whether an xdist unit (a node id's first part is its file) is of :data:`SLOW_FILES`."""
    return scope.split("::", 1)[0].rsplit("/", 1)[-1] in SLOW_FILES


@functools.cache
def _sharing(path: Path) -> frozenset[str] | None:
    """The top-level tests and classes of the file at ``path`` that use a module-scoped
    fixture of the file; None: every test of the file goes with the file."""
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return None
    if "# xdist: one worker" in text:
        return None
    fixtures: dict[str, set[str]] = {}  # fixture: the fixtures it asks for
    shared: set[str] = set()  # the module-scoped ones
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            target = call.func if call else decorator
            if not (isinstance(target, ast.Attribute) and target.attr == "fixture"):
                continue
            options = {
                k.arg: k.value.value
                for k in (call.keywords if call else [])
                if isinstance(k.value, ast.Constant)
            }
            name = str(options.get("name", node.name))
            fixtures[name] = {a.arg for a in node.args.args}
            if options.get("scope") == "module":
                if options.get("autouse") is True:
                    return None
                shared.add(name)
    grew = True
    while grew:  # a fixture that asks for a shared one is shared with it
        grew = False
        for name, asks in fixtures.items():
            if name not in shared and asks & shared:
                shared.add(name)
                grew = True
    if not shared:
        return frozenset()

    def uses(node: ast.AST) -> bool:
        for inner in ast.walk(node):
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                {a.arg for a in inner.args.args} & shared
            ):
                return True
            if isinstance(inner, ast.Constant) and inner.value in shared:
                return True  # @pytest.mark.usefixtures("name")
        return False

    return frozenset(
        node.name
        for node in tree.body
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name.startswith(("Test", "test"))
        and uses(node)
    )


_TMP_NUMBERS: dict[str, int] = {}


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pytest's ``tmp_path``, the same folder (the test's name cut to 30 characters and a
    number, in the session's base folder), made without listing the base folder.

    pytest finds the number by listing every folder made so far, once a test: with
    about 2,500 tests a worker that took each worker about 2 s of CPU, growing with the
    square of the count. Every test has one (``_no_ambient_journal`` below).
    """
    name = re.sub(r"[\W]", "_", request.node.name)[:30]
    base = tmp_path_factory.getbasetemp()
    while True:
        number = _TMP_NUMBERS.get(name, 0)
        _TMP_NUMBERS[name] = number + 1
        path = base / f"{name}{number}"
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:  # made by tmp_path_factory.mktemp(name)
            continue
        return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A journal path in a fresh temporary folder (the file does not exist yet)."""
    return tmp_path / "journal.db"


@pytest.fixture(autouse=True)
def _no_ambient_journal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    # Never touch a developer's .letitloop/ or $LETITLOOP_DB by accident.
    monkeypatch.delenv("LETITLOOP_DB", raising=False)
    monkeypatch.delenv("LETITLOOP_WATCH_ID", raising=False)
    # Nor a journal above the test's folder (a /tmp/.letitloop/ a script left, say): the
    # search for the nearest .letitloop/journal.db stops there (letitloop/stores/discovery.py).
    monkeypatch.setenv("LETITLOOP_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.chdir(tmp_path)
    yield


def _child_pids() -> list[int]:
    """Live child processes of this process (Linux /proc; empty elsewhere)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.append(int(entry.parent.name))
    return found


@pytest.fixture(scope="session", autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """Fail the session if a test left a thread or a child process running.

    A leftover non-daemon thread keeps the interpreter alive after "passed"
    (a forgotten 60 s timer once did); a leftover child holds locks and files.
    """
    yield
    from helpers import stop_forker

    stop_forker()  # the forking interpreter the tests shared (helpers.run_forked)
    requests = sys.modules.get("benchmarks.langgraph_requests")
    if requests is not None:  # its trials' forking process (tests/test_langgraph_requests.py)
        requests.stop_forker()
    deadline = time.monotonic() + 5  # threads that are just finishing get a moment
    while True:
        threads = [t for t in threading.enumerate() if t is not threading.main_thread()]
        children = _child_pids()
        if (not threads and not children) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not threads, f"tests left threads running: {threads}"
    assert not children, f"tests left child processes running: {children}"
