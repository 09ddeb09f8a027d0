"""The durability contract, run over every store and every mode that must keep it.

Every promise here is checked in each combination of store, durability and
sync/async code, from outside the writer (a second connection, a fresh
process, a child killed with SIGKILL):

- a step's result is committed before ``step()`` returns;
- a fresh process (a fresh journal) replays it without calling the function;
- after a SIGKILL at a random point (a holder that died), no step that had
  returned runs again, and the next opener takes the run at once;
- one holder at a time enters a marker, and its body runs once;
- a run is held by one opener at a time; a pause notices another's commit.

A new store (an implementation of ``letitloop.stores.storage.Storage``, registered
for its scheme in ``letitloop.stores.schemes``) joins by one entry in ``BACKENDS``
and nothing else: a ``Backend`` with its ``name``, its ``location`` (the
journal's ``path=``, which selects the store), its ``done_keys`` (the keys of a
goal's done steps, read from outside any writer with the store's own client),
whether other processes reach it (``processes``) and, for a store that lives
in one process, how a holder dies there (``abandon``). Nothing else in this
file names a store.

Which cases run where:

- ``TestAStepThatReturned``, ``TestAFreshJournal``, ``TestAMarkerRaceOfThreads``,
  ``TestAChangeNotice`` and ``TestAHeldRun`` run in one process: on every store.
- ``TestAProcess…`` cases need a second process (a fresh process, a
  SIGKILL, processes racing: each a child forked from one interpreter that
  imported letitloop once and opened nothing, its own pid, killed for real:
  tests/preloaded.py): only on stores other processes reach
  (``processes=True``: SQLite). The in-memory store dies with its process,
  so they cannot hold for it, and are not run there.
- ``TestAHolderThatDied`` simulates a death inside one process: the holder's
  journal is abandoned mid-step, never closed (``Backend.abandon``; the
  in-memory store drops its connection, releasing its holds as the kernel
  releases a SIGKILLed process's locks, and refuses everything it tries
  afterwards). SQLite's holders die for real in ``TestAProcessKilledAtARandomPoint``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pg_server
import pytest
from helpers import wait_until, write_script
from preloaded import Preloaded

from letitloop import Journal
from letitloop.errors import JournalFileError, RunHeldError
from letitloop.integrity.checksums import marker_sum, pause_sum, step_sum
from letitloop.stores.memory.database import database
from letitloop.stores.memory.storage import abandon, open_memory


@dataclass(frozen=True)
class Backend:
    """A store the contract runs over; this one is the SQLite journal file."""

    name: str
    #: Whether other processes reach the store: the cases that need a second process run.
    processes: bool = True
    durabilities: tuple[str, ...] = ("process", "power")

    def location(self, tmp_path: Path) -> str:
        """What ``path=`` of the journal is for this store."""
        return str(tmp_path / "journal.db")

    def done_keys(self, location: str, goal: str) -> list[str]:
        """The keys of the goal's done steps, in journal order, read from outside any writer."""
        conn = sqlite3.connect(location)
        try:
            (table,) = conn.execute(
                "SELECT journal_table FROM goals WHERE goal = ?", (goal,)
            ).fetchone()
            return [
                k
                for (k,) in conn.execute(
                    f"SELECT key FROM \"{table}\" WHERE kind = 'step' AND status = 'done' "
                    f"ORDER BY rowid"
                )
            ]
        finally:
            conn.close()

    #: How a holder dies inside this process (its journal abandoned, never closed);
    #: None when only a real death shows it (a SIGKILLed process: processes=True).
    abandon: Callable[[Journal], None] | None = None

    def commit_from_outside(self, location: str) -> None:
        """Commit something through another connection (what a change notice is for)."""
        conn = sqlite3.connect(location)
        try:
            with conn:
                conn.execute("UPDATE goals SET goal = goal")
        finally:
            conn.close()

    def edit_result(
        self, location: str, goal: str, key: str, text: str, *, crc: bool = False
    ) -> None:
        """Change a row's stored result from outside letitloop, as anyone with the store could
        (``crc``: its public CRC-32 recomputed too, as someone who edits on purpose would)."""
        conn = sqlite3.connect(location)
        try:
            with conn:
                (table,) = conn.execute(
                    "SELECT journal_table FROM goals WHERE goal = ?", (goal,)
                ).fetchone()
                conn.execute(f'UPDATE "{table}" SET result = ? WHERE key = ?', (text, key))
                if crc:
                    run, fn, fp = conn.execute(
                        f'SELECT run, fn, args_fp FROM "{table}" WHERE key = ?', (key,)
                    ).fetchone()
                    checksum = step_sum(run, key, "done", fn, fp, text, None)
                    conn.execute(
                        f'UPDATE "{table}" SET checksum = ? WHERE key = ?', (checksum, key)
                    )
        finally:
            conn.close()

    def forge_row(self, location: str, goal: str, key: str, **cols: Any) -> None:
        """Set columns of row ``key`` from outside letitloop (its checksum among them)."""
        conn = sqlite3.connect(location)
        try:
            with conn:
                (table,) = conn.execute(
                    "SELECT journal_table FROM goals WHERE goal = ?", (goal,)
                ).fetchone()
                sets = ", ".join(f"{c} = ?" for c in cols)
                conn.execute(f'UPDATE "{table}" SET {sets} WHERE key = ?', (*cols.values(), key))
        finally:
            conn.close()

    def stored_text(self, location: str) -> str:
        """Everything the store holds, as text (a file's bytes, its -wal's too)."""
        parts = [Path(location), Path(f"{location}-wal")]
        return "".join(p.read_bytes().decode("latin-1") for p in parts if p.exists())


def _abandon_memory(j: Journal) -> None:
    abandon(j.store)


@dataclass(frozen=True)
class MemoryBackend(Backend):
    """The in-memory store (``memory://NAME``): one process's memory, no second process."""

    def location(self, tmp_path: Path) -> str:
        return f"memory://contract-{uuid.uuid4().hex}"

    def commit_from_outside(self, location: str) -> None:
        other = open_memory(location)  # a second connection to the same database
        other.find_or_start_run("contract", "outside", None, None, time.time(), lambda r: None)
        other.close()

    def done_keys(self, location: str, goal: str) -> list[str]:
        # The database itself, as a second connection would read it.
        return [
            r["key"]
            for r in database(location).rows(goal)
            if r["kind"] == "step" and r["status"] == "done"
        ]

    def edit_result(
        self, location: str, goal: str, key: str, text: str, *, crc: bool = False
    ) -> None:
        (row,) = [r for r in database(location).rows(goal) if r["key"] == key]
        row["result"] = text
        if crc:
            row["checksum"] = step_sum(
                row["run"], key, "done", row["fn"], row["args_fp"], text, None
            )

    def forge_row(self, location: str, goal: str, key: str, **cols: Any) -> None:
        (row,) = [r for r in database(location).rows(goal) if r["key"] == key]
        for col, value in cols.items():
            row[col] = value

    def stored_text(self, location: str) -> str:
        db = database(location)
        return repr((db.runs, db.goals, db.tries, db.global_markers))


@dataclass(frozen=True)
class PostgresBackend(Backend):
    """A PostgreSQL database (``postgresql://…``): a schema of its own on the tests' server."""

    def location(self, tmp_path: Path) -> str:
        return pg_server.location()

    def commit_from_outside(self, location: str) -> None:
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute("UPDATE ll_runs SET status = status WHERE false")

    def done_keys(self, location: str, goal: str) -> list[str]:
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT key FROM ll_journal WHERE goal = %s AND kind = 'step' "
                "AND status = 'done' ORDER BY rowid",
                (goal,),
            ).fetchall()
        return [k for (k,) in rows]

    def edit_result(
        self, location: str, goal: str, key: str, text: str, *, crc: bool = False
    ) -> None:
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute(
                "UPDATE ll_journal SET result = %s WHERE goal = %s AND key = %s", (text, goal, key)
            )
            if crc:
                found = conn.execute(
                    "SELECT run, fn, args_fp FROM ll_journal WHERE goal = %s AND key = %s",
                    (goal, key),
                ).fetchone()
                assert found is not None
                run, fn, fp = found
                conn.execute(
                    "UPDATE ll_journal SET checksum = %s WHERE goal = %s AND key = %s",
                    (step_sum(run, key, "done", fn, fp, text, None), goal, key),
                )

    def forge_row(self, location: str, goal: str, key: str, **cols: Any) -> None:
        import psycopg

        sets = ", ".join(f"{c} = %s" for c in cols)
        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute(
                f"UPDATE ll_journal SET {sets} WHERE goal = %s AND key = %s",
                (*cols.values(), goal, key),
            )

    def stored_text(self, location: str) -> str:
        import psycopg

        # Every row of every table of the schema, as the server holds it.
        with psycopg.connect(location, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            ).fetchall()
            return "".join(
                str(conn.execute(f"SELECT t::text FROM {name} AS t").fetchall())
                for (name,) in tables
            )


BACKENDS = [
    Backend("sqlite"),
    MemoryBackend("memory", processes=False, durabilities=("process",), abandon=_abandon_memory),
    PostgresBackend("postgres"),
]


@dataclass(frozen=True)
class Mode:
    backend: Backend
    durability: str
    kind: str  # "sync" or "async"

    def __str__(self) -> str:
        return f"{self.backend.name}-{self.durability}-{self.kind}"


MODES = [Mode(b, d, k) for b in BACKENDS for d in b.durabilities for k in ("sync", "async")]
#: The modes of stores other processes reach: the cases that need a second process.
PROCESS_MODES = [m for m in MODES if m.backend.processes]
#: The modes of stores where a holder can die inside this process.
ABANDON_MODES = [m for m in MODES if m.backend.abandon is not None]


@pytest.fixture(params=MODES, ids=str)
def mode(request: pytest.FixtureRequest) -> Mode:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=PROCESS_MODES, ids=str)
def process_mode(request: pytest.FixtureRequest) -> Mode:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=ABANDON_MODES, ids=str)
def abandon_mode(request: pytest.FixtureRequest) -> Mode:
    return request.param  # type: ignore[no-any-return]


#: Runs steps s0..s{n-1} of one run; each step's function writes "start i" and
#: "done i" to a side file around a short sleep, and prints "returned i" after
#: the step returned (so the harness knows what returned before a kill).
STEPS = """
    import asyncio, os, sys, time
    from letitloop import Journal

    location, durability, kind, side, n = sys.argv[1:6]
    n = int(n)
    go = sys.argv[6] if len(sys.argv) > 6 else None  # after step i returned, wait for GO{i}

    def log(line):
        with open(side, "a") as f:
            f.write(line + "\\n")

    def work(i):
        log(f"start {i} {os.getpid()}")
        time.sleep(0.002)
        log(f"done {i} {os.getpid()}")
        return {"i": i, "twice": i * 2}

    async def awork(i):
        log(f"start {i} {os.getpid()}")
        await asyncio.sleep(0.002)
        log(f"done {i} {os.getpid()}")
        return {"i": i, "twice": i * 2}

    def sync_main():
        with Journal("contract", run="r", path=location, durability=durability) as j:
            for i in range(n):
                got = j.step(f"s{i}", work, i)
                assert got == {"i": i, "twice": i * 2}, got
                print(f"returned {i}", flush=True)  # one write: a kill cuts no line in two
                while go and not os.path.exists(f"{go}{i}"):
                    time.sleep(0.001)

    async def async_main():
        async with Journal("contract", run="r", path=location, durability=durability) as j:
            for i in range(n):
                got = await j.async_step(f"s{i}", awork, i)
                assert got == {"i": i, "twice": i * 2}, got
                print(f"returned {i}", flush=True)  # one write: a kill cuts no line in two
                while go and not os.path.exists(f"{go}{i}"):
                    time.sleep(0.001)

    if kind == "sync":
        sync_main()
    else:
        asyncio.run(async_main())
    print("finished", flush=True)
"""


def starts(side: Path) -> list[tuple[int, int]]:
    if not side.exists():
        return []
    out = []
    for line in side.read_text().splitlines():
        word, i, pid = line.split()
        if word == "start":
            out.append((int(i), int(pid)))
    return out


@pytest.fixture(scope="module")
def holders() -> Iterator[Preloaded]:
    """Forks the processes that die or race (killed at random points, racing for a marker)
    and those that run to their end, from an interpreter that imported letitloop and
    PostgreSQL's driver and store once: each a process of its own, its own pid, SIGKILLed
    for real (tests/preloaded.py)."""
    with Preloaded(
        "letitloop", "psycopg", "letitloop.stores.postgres.storage", with_letitloop=True
    ) as forker:
        yield forker


class TestAProcessThatRanSteps:
    def test_each_step_was_committed_before_step_returned(
        self, tmp_path: Path, process_mode: Mode, holders: Preloaded
    ) -> None:
        mode = process_mode
        location = mode.backend.location(tmp_path)
        side, go = tmp_path / "side.log", tmp_path / "go"
        script = write_script(tmp_path, "steps.py", STEPS)
        args = (location, mode.durability, mode.kind, str(side), "3", str(go))
        child = holders.start(script, *args)
        try:
            for i in range(3):
                wait_until(
                    lambda: f"returned {i}\n" in child.printed() or not child.running(),  # noqa: B023
                    f"step {i} returned",
                )
                assert child.printed().splitlines()[-1] == f"returned {i}", child.printed()
                # The child now waits: what another process sees is what step i committed.
                assert mode.backend.done_keys(location, "contract") == [
                    f"s{k}" for k in range(i + 1)
                ]
                Path(f"{go}{i}").touch()
        except BaseException:  # a failed check: do not leave the child waiting for its go
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            child.wait()
            raise
        done = child.wait()
        assert done.returncode == 0, done.stderr

    def test_its_steps_are_replayed_by_a_fresh_process_without_calling_the_function(
        self, tmp_path: Path, process_mode: Mode, holders: Preloaded
    ) -> None:
        mode = process_mode
        location = mode.backend.location(tmp_path)
        side = tmp_path / "side.log"
        script = write_script(tmp_path, "steps.py", STEPS)
        args = (location, mode.durability, mode.kind, str(side), "5")
        first = holders.run(script, *args)
        assert first.returncode == 0, first.stderr
        again = holders.run(script, *args)
        assert again.returncode == 0, again.stderr
        assert [i for i, _ in starts(side)] == [0, 1, 2, 3, 4]  # the second run called nothing
        assert again.stdout.split().count("returned") == 5


class TestAProcessKilledAtARandomPoint:
    @pytest.mark.slow  # children SIGKILLed at random points, over and over
    def test_no_step_that_returned_runs_again(
        self, tmp_path: Path, process_mode: Mode, holders: Preloaded
    ) -> None:
        mode = process_mode
        rng = random.Random(f"{os.environ.get('LETITLOOP_TEST_SEED', '20261130')}-{mode}")
        location = mode.backend.location(tmp_path)
        side = tmp_path / "side.log"
        script = write_script(tmp_path, "steps.py", STEPS)
        args = (location, mode.durability, mode.kind, str(side), "12")
        returned: set[int] = set()
        for _ in range(6):
            child = holders.start(script, *args)
            deadline = time.monotonic() + rng.uniform(0.02, 0.15)
            while time.monotonic() < deadline and child.running():
                time.sleep(0.002)
            with contextlib.suppress(ProcessLookupError):  # it may have just finished
                os.kill(child.pid, signal.SIGKILL)
            lines = child.wait().stdout.splitlines()
            before = set(returned)
            returned |= {int(x.split()[1]) for x in lines if x.startswith("returned")}
            # Steps this attempt started that had returned in an earlier attempt: none.
            pid_starts = {i for i, pid in starts(side) if pid == child.pid}
            assert not pid_starts & before, (pid_starts, before)
            if "finished" in lines:
                break
        final = holders.run(script, *args)
        assert final.returncode == 0 and "finished" in final.stdout, final.stderr
        runs_of = [i for i, _ in starts(side)]
        for i in returned:
            assert runs_of.count(i) >= 1
        # Each step ran at most once per attempt, and once more only if it was in flight.
        assert sorted(set(runs_of)) == list(range(12))
        assert mode.backend.done_keys(location, "contract") == [f"s{i}" for i in range(12)]


MARKER = """
    import asyncio, os, sys, time
    from letitloop import Journal

    location, durability, kind, side, go = sys.argv[1:6]

    def body():
        with open(side, "a") as f:
            f.write(f"body {os.getpid()}\\n")
        time.sleep(0.05)

    print("ready", flush=True)
    while not os.path.exists(go):  # start together
        time.sleep(0.001)

    def sync_main():
        with Journal("contract", run=f"p{os.getpid()}", path=location, durability=durability) as j:
            with j.atomic_marker("charge", scope="goal", timeout=30) as should:
                if should:
                    body()
                print("offer", bool(should), flush=True)

    async def async_main():
        async with Journal(
            "contract", run=f"p{os.getpid()}", path=location, durability=durability
        ) as j:
            async with j.atomic_marker("charge", scope="goal", timeout=30) as should:
                if should:
                    body()
                print("offer", bool(should), flush=True)

    if kind == "sync":
        sync_main()
    else:
        asyncio.run(async_main())
"""


class TestAProcessRaceForAMarker:
    def test_one_process_at_a_time_enters_and_the_body_runs_once(
        self, tmp_path: Path, process_mode: Mode, holders: Preloaded
    ) -> None:
        mode = process_mode
        location = mode.backend.location(tmp_path)
        side, go = tmp_path / "side.log", tmp_path / "go"
        script = write_script(tmp_path, "marker.py", MARKER)
        children = [
            holders.start(script, location, mode.durability, mode.kind, str(side), str(go))
            for _ in range(4)
        ]
        for c in children:  # each waits for the go: they start together
            wait_until(lambda: c.printed() != "" or not c.running(), "each child is ready")  # noqa: B023
        go.touch()
        outs = [c.wait() for c in children]
        assert [c.returncode for c in outs] == [0] * 4, outs
        offers = sorted(out.stdout.removeprefix("ready\n").strip() for out in outs)
        assert offers == ["offer False"] * 3 + ["offer True"]
        assert len(side.read_text().splitlines()) == 1


# -- the cases that fit in one process: every store ----------------------------------


class Calls:
    """The step function of the in-process cases, and who called it with what."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.lock = threading.Lock()
        #: Called inside the function with i, before it returns (a case's hook).
        self.inside: Callable[[int], None] = lambda i: None

    def work(self, i: int) -> dict[str, int]:
        with self.lock:
            self.calls.append(i)
        self.inside(i)
        return {"i": i, "twice": i * 2}

    async def awork(self, i: int) -> dict[str, int]:
        return self.work(i)

    def secret(self, i: int) -> dict[str, Any]:
        """A result that holds a secret (``SECRET``), for the cases of keys."""
        self.work(i)
        return {"i": i, "token": f"{SECRET}-{i}"}

    async def asecret(self, i: int) -> dict[str, Any]:
        return self.secret(i)


def steps_in(
    mode: Mode,
    location: str,
    n: int,
    calls: Calls,
    *,
    after: Callable[[int], None] = lambda i: None,
    opened: Callable[[Journal], None] = lambda j: None,
    close: bool = True,
    fail: bool = False,
) -> Journal:
    """Steps s0..s{n-1} of run "r" of goal "contract", sync or async as ``mode`` says.

    ``after(i)`` runs once step i returned; ``close=False`` never closes the
    journal, whatever happens (a holder that dies does not close it);
    ``fail=True`` closes it as failed (the next opener resumes the run).
    """
    stop = RuntimeError("stopped after the last step asked for") if fail else None
    j = Journal("contract", run="r", path=location, durability=mode.durability)  # type: ignore[arg-type]

    def check(i: int, got: Any) -> None:
        assert got == {"i": i, "twice": i * 2}, got
        after(i)

    if mode.kind == "sync":
        j.open()
        opened(j)
        try:
            for i in range(n):
                check(i, j.step(f"s{i}", calls.work, i))
        except BaseException as exc:
            if close:
                j.close(exc)
            raise
        if close:
            j.close(stop)
        return j

    async def main() -> None:
        await asyncio.to_thread(j.open)
        opened(j)
        try:
            for i in range(n):
                check(i, await j.async_step(f"s{i}", calls.awork, i))
        except BaseException as exc:
            if close:
                await j.__aexit__(type(exc), exc, None)
            raise
        if close:
            await j.__aexit__(None if stop is None else RuntimeError, stop, None)

    asyncio.run(main())
    return j


class TestAStepThatReturned:
    def test_is_committed_before_step_returns(self, tmp_path: Path, mode: Mode) -> None:
        location = mode.backend.location(tmp_path)
        seen: list[list[str]] = []
        steps_in(
            mode,
            location,
            3,
            Calls(),
            after=lambda i: seen.append(mode.backend.done_keys(location, "contract")),
        )
        assert seen == [["s0"], ["s0", "s1"], ["s0", "s1", "s2"]]


class TestAFreshJournal:
    def test_replays_every_returned_step_without_calling_the_function(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        location = mode.backend.location(tmp_path)
        calls = Calls()
        steps_in(mode, location, 5, calls)
        again = steps_in(mode, location, 5, calls)
        assert calls.calls == [0, 1, 2, 3, 4]  # the second journal called nothing
        assert again.was_completed
        assert mode.backend.done_keys(location, "contract") == [f"s{i}" for i in range(5)]


class TestAMarkerRaceOfThreads:
    def test_one_journal_at_a_time_enters_and_the_body_runs_once(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        location = mode.backend.location(tmp_path)
        go = threading.Barrier(4)
        offers: list[bool] = []
        bodies: list[int] = []
        inside = [0, 0]  # now, most at once
        guard = threading.Lock()

        def body(n: int) -> None:
            with guard:
                bodies.append(n)
                inside[0] += 1
                inside[1] = max(inside)
            time.sleep(0.05)
            with guard:
                inside[0] -= 1

        def racer(n: int) -> None:
            j = Journal("contract", run=f"t{n}", path=location, durability=mode.durability)  # type: ignore[arg-type]
            go.wait()
            if mode.kind == "sync":
                with j, j.atomic_marker("charge", scope="goal", timeout=30) as should:
                    if should:
                        body(n)
                    offers.append(bool(should))
                return

            async def main() -> None:
                async with j, j.atomic_marker("charge", scope="goal", timeout=30) as should:
                    if should:
                        body(n)
                    offers.append(bool(should))

            asyncio.run(main())

        threads = [threading.Thread(target=racer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(offers) == [False, False, False, True]
        assert len(bodies) == 1 and inside[1] == 1


class TestAChangeNotice:
    def test_moves_when_another_connection_commits_and_not_for_the_journals_own(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        location = mode.backend.location(tmp_path)
        with Journal("contract", run="r", path=location, durability=mode.durability) as j:  # type: ignore[arg-type]
            storage = j.store
            assert storage is not None
            before = storage.changes()
            j.step("s0", str, 0)  # its own commit: nothing to wake up for
            assert storage.changes() == before
            mode.backend.commit_from_outside(location)
            # A notice may come a moment after the commit (PostgreSQL's NOTIFY reaches a
            # listener asynchronously): a pause looks again every timers.POLL_SECONDS.
            deadline = time.monotonic() + 5
            while storage.changes() == before and time.monotonic() < deadline:
                time.sleep(0.001)
            assert storage.changes() != before


def _paid(n: int) -> int:
    import letitloop

    letitloop.usage(input_tokens=10 * n, output_tokens=n, cost=0.25)
    return n


class TestAnAttemptsSpan:
    """What OpenTelemetry's spans keep in the store (letitloop/run/otel.py), called directly."""

    def test_each_attempt_gets_back_the_span_the_one_before_recorded(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        location = mode.backend.location(tmp_path)
        first, second = (
            "00-" + "a" * 32 + "-" + "b" * 16 + "-01",
            "00-" + "c" * 32 + "-" + "d" * 16 + "-01",
        )
        with pytest.raises(RuntimeError), Journal("contract", run="r", path=location) as j:
            storage = j.store
            assert storage is not None
            assert storage.trace_attempt(j.run_id, j.attempt, first) is None
            raise RuntimeError("the attempt fails")
        with Journal("contract", run="r", path=location) as j:
            storage = j.store
            assert storage is not None and j.attempt == 2
            assert storage.trace_attempt(j.run_id, j.attempt, second) == first
        with Journal("contract", run="r2", path=location) as j:  # another run: its own
            assert j.store is not None
            assert j.store.trace_attempt(j.run_id, j.attempt, second) is None

    def test_usage_of_sums_the_usage_recorded_on_the_rows_asked_for(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        location = mode.backend.location(tmp_path)
        with Journal("contract", run="r", path=location) as j:
            for n in (1, 2, 3):
                j.step(f"s{n}", _paid, n)
            j.step("free", str, 0)
            storage = j.store
            assert storage is not None
            assert storage.usage_of(j.run_id, ["s1", "s3", "free"]) == (40, 4, 0.5)
            assert storage.usage_of(j.run_id, ["free"]) == (None, None, None)
            assert storage.usage_of(j.run_id, []) == (None, None, None)


class TestAHeldRun:
    def test_a_second_opener_waits_then_fails_naming_the_holder_then_gets_it(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        location = mode.backend.location(tmp_path)
        holding, leave = threading.Event(), threading.Event()

        def holder() -> None:
            with Journal("contract", run="r", path=location, durability=mode.durability):  # type: ignore[arg-type]
                holding.set()
                leave.wait(30)

        first = threading.Thread(target=holder)
        first.start()
        try:
            assert holding.wait(30)
            started = time.monotonic()
            with pytest.raises(RunHeldError) as caught:
                Journal("contract", run="r", path=location, timeout=0.3).open()
            assert time.monotonic() - started >= 0.3  # it waited for the holder first
            assert caught.value.pid == os.getpid()
        finally:
            leave.set()
            first.join(30)
        calls = Calls()
        steps_in(mode, location, 1, calls)  # released: the next opener gets it
        assert calls.calls == [0]


class TestAHolderThatDied:
    """A holder's journal abandoned mid-step, never closed, as a holder that died leaves it."""

    def test_its_run_is_taken_at_once_and_no_returned_step_runs_again(
        self, tmp_path: Path, abandon_mode: Mode
    ) -> None:
        mode = abandon_mode
        backend = mode.backend
        assert backend.abandon is not None
        rng = random.Random(f"{os.environ.get('LETITLOOP_TEST_SEED', '20261130')}-{mode}")
        location = backend.location(tmp_path)
        n = 12
        calls = Calls()
        frozen: list[int] = []
        late: list[BaseException] = []
        for _ in range(4):
            done = len(backend.done_keys(location, "contract"))
            if done == n:
                break
            freeze_at = rng.randrange(done, n)
            inside, thaw = threading.Event(), threading.Event()
            box: list[Journal] = []

            def freeze(
                i: int, freeze_at: int = freeze_at, inside: Any = inside, thaw: Any = thaw
            ) -> None:
                if i == freeze_at and not inside.is_set():
                    inside.set()
                    thaw.wait(30)  # frozen in the step's function, until the case ends

            calls.inside = freeze

            def doomed(box: list[Journal] = box) -> None:
                try:
                    steps_in(mode, location, n, calls, opened=box.append, close=False)
                except BaseException as exc:  # what it tried after its death was refused
                    late.append(exc)

            thread = threading.Thread(target=doomed)
            thread.start()
            assert inside.wait(30)
            returned = set(backend.done_keys(location, "contract"))
            backend.abandon(box[0])  # it dies inside step freeze_at
            frozen.append(freeze_at)
            calls.inside = lambda i: None
            thaw.set()
            thread.join(30)
            assert isinstance(late[-1], JournalFileError), late[-1]
            # Nothing the dead holder tried after its death reached the store.
            assert set(backend.done_keys(location, "contract")) == returned
            before = list(calls.calls)
            started = time.monotonic()
            steps_in(mode, location, freeze_at + 1, calls, fail=True)  # taken at once
            assert time.monotonic() - started < 5
            again = calls.calls[len(before) :]
            assert not {f"s{i}" for i in again} & returned  # no returned step ran again
            assert again == list(range(len(returned), freeze_at + 1))
            # What a real death also ends, in the dead process: its journal's watcher
            # of steps in flight and its place among the open journals. Closing it
            # writes nothing (its connection refuses), and lets go of those.
            with pytest.raises(JournalFileError):
                box[0].close()
            assert set(backend.done_keys(location, "contract")) >= returned
        steps_in(mode, location, n, calls)
        assert backend.done_keys(location, "contract") == [f"s{i}" for i in range(n)]
        # Each step ran once, and once more each time a holder died inside it.
        for i in range(n):
            assert calls.calls.count(i) == 1 + frozen.count(i), (i, calls.calls, frozen)


class TestARunWithABudget:
    def test_its_spend_counts_a_failed_attempts_call_and_stops_it_before_a_step(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        from letitloop import Budget, BudgetExceededError, usage

        location = mode.backend.location(tmp_path)
        called: list[str] = []

        def paid(name: str, fail: bool) -> str:
            called.append(name)
            usage(input_tokens=100, cost=0.5)
            if fail:
                raise RuntimeError("the model timed out")
            return name

        with pytest.raises(RuntimeError), Journal("budget", path=location) as j:
            j.step("a", paid, "a", True)  # failed: its usage stays on its row
        with (
            pytest.raises(BudgetExceededError) as caught,
            Journal("budget", path=location, budget=Budget(tokens=150)) as j,
        ):
            j.step("a", paid, "a", False)  # 100 (the failed call) + 100: 200
            j.step("b", paid, "b", False)
        assert called == ["a", "a"]
        assert caught.value.key == "b"
        assert caught.value.tokens == 200 and caught.value.cost == 1.0


SEAL_KEY = "s" * 16 + "-contract-seal-key"
ENCRYPTION_KEY = "e" * 16 + "-contract-encryption"
SECRET = "PLAINTEXT-CONTRACT-4711"


def secret_run(mode: Mode, location: str, calls: Calls, **keys: Any) -> None:
    """Run "r" of goal "secret": steps s0..s2 (results holding SECRET), a marker, a sleep,
    with ``keys`` (``seal=``, ``encryption_key=``), sync or async as ``mode`` says."""

    def journal() -> Journal:
        return Journal("secret", run="r", path=location, durability=mode.durability, **keys)  # type: ignore[arg-type]

    if mode.kind == "sync":
        with journal() as j:
            for i in range(3):
                assert j.step(f"s{i}", calls.secret, i)["token"] == f"{SECRET}-{i}"
            with j.atomic_marker("once"):
                pass
            j.sleep("nap", 0)
        return

    async def main() -> None:
        async with journal() as j:
            got = await asyncio.gather(*(j.async_step(f"s{i}", calls.asecret, i) for i in range(3)))
            assert [g["token"] for g in got] == [f"{SECRET}-{i}" for i in range(3)]
            with j.atomic_marker("once"):
                pass
            await j.async_sleep("nap", 0)

    asyncio.run(main())


def secret_step(mode: Mode, j: Journal, key: str, calls: Calls, i: int) -> Any:
    """Step ``key`` of ``calls.secret``, sync or async as ``mode`` says (as ``secret_run``)."""
    if mode.kind == "sync":
        return j.step(key, calls.secret, i)

    async def main() -> Any:
        return await j.async_step(key, calls.asecret, i)

    return asyncio.run(main())


def verdict(location: str, secret: str = SEAL_KEY) -> Any:
    """``lil verify``'s check of run "r", through the store's own inspector."""
    from letitloop.inspection import open_inspector
    from letitloop.inspection.verify import chain_of, check_chain

    inspector = open_inspector(location)
    try:
        (run,) = inspector.runs_named("r")
        entries, rows = chain_of(inspector, run)
    finally:
        inspector.close()
    return check_chain(run.id, run.goal, entries, rows, secret.encode())


class TestASealedRun:
    def test_its_chain_verifies_and_an_edited_result_breaks_it(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        location = mode.backend.location(tmp_path)
        secret_run(mode, location, Calls(), seal=SEAL_KEY)
        found = verdict(location)
        # Three steps, the marker and the sleep: an entry each.
        assert (found.state, found.entries, found.broken) == ("sealed", 5, None)
        assert verdict(location, "o" * 16 + "-another-key").state == "broken"
        mode.backend.edit_result(location, "secret", "s1", '{"i": 1, "token": "forged"}')
        found = verdict(location)
        assert found.state == "broken" and found.key == "s1" and "edited" in str(found.broken)

    def test_a_forged_result_is_refused_when_it_replays(self, tmp_path: Path, mode: Mode) -> None:
        from letitloop.errors import ForgedRowError

        location = mode.backend.location(tmp_path)
        calls = Calls()
        secret_run(mode, location, calls, seal=SEAL_KEY)
        forged = '{"i": 1, "token": "forged"}'
        mode.backend.edit_result(location, "secret", "s1", forged, crc=True)
        durability: Any = mode.durability
        with Journal("secret", run="r", path=location, durability=durability, seal=SEAL_KEY) as j:
            assert secret_step(mode, j, "s0", calls, 0)["token"] == f"{SECRET}-0"
            with pytest.raises(ForgedRowError, match=r"step 's1' .*does not match the run's seal"):
                secret_step(mode, j, "s1", calls, 1)
        assert sorted(calls.calls) == [0, 1, 2]  # nothing handed back, nothing called again

    def test_a_fresh_journal_continues_its_chain_and_refuses_another_key(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        from letitloop.errors import SealKeyError

        location = mode.backend.location(tmp_path)
        calls = Calls()
        secret_run(mode, location, calls, seal=SEAL_KEY)
        with Journal("secret", run="r", path=location, seal=SEAL_KEY) as j:
            secret_step(mode, j, "s0", calls, 0)  # replayed: adds nothing
            secret_step(mode, j, "later", calls, 9)
        assert sorted(calls.calls) == [0, 1, 2, 9]
        found = verdict(location)
        assert (found.state, found.entries) == ("sealed", 6)
        with pytest.raises(SealKeyError, match="not sealed with this key"):
            Journal("secret", run="r", path=location, seal="o" * 16 + "-another-key").open()

    def test_a_value_sent_to_its_wait_is_unsealed_until_its_next_attempt_seals_it(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        from letitloop import send
        from letitloop.primitives.waits import RunWaiting

        location = mode.backend.location(tmp_path)
        calls = Calls()
        with (
            pytest.raises(RunWaiting),
            Journal("secret", run="r", path=location, seal=SEAL_KEY) as j,
        ):
            secret_step(mode, j, "a", calls, 0)
            j.wait_for("approval", stop_after=0)
        send("r", "approval", {"ok": True}, path=location)  # without the key
        found = verdict(location)
        assert (found.state, found.entries, found.unsealed) == ("sealed", 1, ["approval"])
        with Journal("secret", run="r", path=location, seal=SEAL_KEY) as j:
            secret_step(mode, j, "a", calls, 0)
            assert j.wait_for("approval") == {"ok": True}
        found = verdict(location)
        assert (found.state, found.entries, found.unsealed) == ("sealed", 2, [])

    def test_a_forged_marker_and_wait_value_are_refused_when_they_replay(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        from letitloop import send
        from letitloop.errors import ForgedRowError
        from letitloop.primitives.waits import RunWaiting

        location = mode.backend.location(tmp_path)
        durability: Any = mode.durability

        def attempt(decline: bool = False) -> tuple[Any, list[str]]:
            charged: list[str] = []
            with Journal(
                "secret", run="r", path=location, durability=durability, seal=SEAL_KEY
            ) as j:

                def body() -> Any:
                    got = j.wait_for("approval", stop_after=0)
                    with j.atomic_marker("charge") as go:
                        if go:
                            charged.append("charged")
                            if decline:
                                raise RuntimeError("declined")
                    return got

                async def abody() -> Any:
                    got = await j.async_wait_for("approval", stop_after=0)
                    async with j.atomic_marker("charge") as go:
                        if go:
                            charged.append("charged")
                            if decline:
                                raise RuntimeError("declined")
                    return got

                got = body() if mode.kind == "sync" else asyncio.run(abody())
                return got, charged

        with pytest.raises(RunWaiting):
            attempt()
        send("r", "approval", {"ok": True}, path=location)  # without the key
        with pytest.raises(RuntimeError, match="declined"):
            attempt(decline=True)  # the marker is recorded failed
        with Journal("secret", run="r", path=location, seal=SEAL_KEY) as j:
            run_id = j.run_id
            assert j.wait_for("approval") == {"ok": True}  # sealed at the open before
        status = {"status": "done", "error": None, "traceback": None}
        mode.backend.forge_row(
            location, "secret", "charge", **status, checksum=marker_sum(run_id, "charge", "done")
        )
        with pytest.raises(ForgedRowError, match=r"marker 'charge' .*does not match"):
            attempt()
        forged = '{"ok": false}'
        mode.backend.forge_row(
            location,
            "secret",
            "approval",
            result=forged,
            checksum=pause_sum(run_id, "approval", "wait", forged, None),
        )
        with pytest.raises(ForgedRowError, match=r"wait 'approval' .*edited after it was sealed"):
            attempt()


class TestAnEncryptedRun:
    def test_its_values_are_stored_encrypted_and_replay_only_with_its_key(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        pytest.importorskip("cryptography")
        from letitloop.errors import EncryptionKeyError

        location = mode.backend.location(tmp_path)
        calls = Calls()
        secret_run(mode, location, calls, encryption_key=ENCRYPTION_KEY)
        stored = mode.backend.stored_text(location)
        assert '{"!enc":"v1:' in stored.replace('\\"', '"').replace('""', '"')
        assert SECRET not in stored
        with Journal("secret", run="r", path=location, encryption_key=ENCRYPTION_KEY) as j:
            assert secret_step(mode, j, "s1", calls, 1) == {"i": 1, "token": f"{SECRET}-1"}
        assert sorted(calls.calls) == [0, 1, 2]  # replayed, not called again
        other = Journal("secret", run="r", path=location, encryption_key="w" * 16 + "-wrong")
        with pytest.raises(EncryptionKeyError, match="encrypted with another key"), other:
            secret_step(mode, other, "s1", calls, 1)
        assert sorted(calls.calls) == [0, 1, 2]

    def test_another_key_or_none_is_refused_at_open_and_nothing_is_written(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        pytest.importorskip("cryptography")
        from letitloop.errors import EncryptionKeyError

        location = mode.backend.location(tmp_path)
        calls = Calls()
        secret_run(mode, location, calls, encryption_key=ENCRYPTION_KEY)
        before = mode.backend.stored_text(location)
        wrong = "w" * 16 + "-wrong"
        for run, key, refusal in [
            ("r", wrong, "encrypted with another key"),
            ("new", wrong, "encrypted with another key"),
            ("r", None, "encrypted and this journal has no key"),
            ("new", None, "encrypted and this journal has no key"),
        ]:
            j = Journal(
                "secret",
                run=run,
                path=location,
                durability=mode.durability,  # type: ignore[arg-type]
                encryption_key=key,
            )
            with pytest.raises(EncryptionKeyError, match=refusal):
                open_as(mode, j)
            assert not j.is_open
        assert mode.backend.stored_text(location) == before
        assert sorted(calls.calls) == [0, 1, 2]
        with Journal("secret", run="r", path=location, encryption_key=ENCRYPTION_KEY) as j:
            assert secret_step(mode, j, "s2", calls, 2) == {"i": 2, "token": f"{SECRET}-2"}
        assert sorted(calls.calls) == [0, 1, 2]  # its own key still opens it


class TestAForkedRun:
    def test_its_copies_are_checksummed_for_it_so_an_edited_copy_is_refused(
        self, tmp_path: Path, mode: Mode
    ) -> None:
        # lil fork's copies (maintenance.fork_run) carry checksums for the fork, as the
        # rows its own attempts write: damage to a copy is never replayed as its value.
        from letitloop.errors import DamagedRowError
        from letitloop.inspection import find_run, open_inspector
        from letitloop.maintenance import fork_run, reset_run

        location = mode.backend.location(tmp_path)
        calls = Calls()
        secret_run(mode, location, calls)
        inspector = open_inspector(location, write=True)
        try:
            source = find_run(inspector, "r")
            fork_run(inspector, source, "s2")
            reset_run(inspector, source.id)  # the source gone: only the copies hold s0, s1
        finally:
            inspector.close()
        mode.backend.edit_result(location, "secret", "s1", '{"i": 1, "token": "forged"}')
        with Journal("secret", run="r", path=location) as j:
            assert secret_step(mode, j, "s0", calls, 0)["token"] == f"{SECRET}-0"
            with pytest.raises(DamagedRowError, match="s1"):
                secret_step(mode, j, "s1", calls, 1)
        assert sorted(calls.calls) == [0, 1, 2]  # nothing called again


def open_as(mode: Mode, j: Journal) -> None:
    """Open ``j`` as ``mode`` says (``with`` or ``async with``), closing it again."""
    if mode.kind == "sync":
        with j:
            return

    async def main() -> None:
        async with j:
            return

    asyncio.run(main())
