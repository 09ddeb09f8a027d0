"""The scheduler: claims each due tick of its schedules and starts the tick's run, once.

:func:`run_schedules` (and ``lil schedules run MODULE``) runs a
:class:`Scheduler` until it is stopped. Each poll it reads the clock and, per
schedule (``schedules.py``):

- **claims the due ticks**: the ticks after the schedule's cursor that its
  catch-up policy keeps (``Schedule.due``), each by inserting its row
  (``Storage.claim_tick``): of every scheduler on the journal (processes on one
  file, hosts on one PostgreSQL) one inserts it, and only that one starts the
  run, ``<schedule>@<tick>``, in a worker thread; the overlap policy may
  record it ``skipped`` or ``queued`` instead. Then it moves the cursor.
- **resumes the orphans**: a tick ``started`` whose run is not held by a live
  process, and whose claimer is gone (a dead pid on this host; a claim older
  than ``RESUME_AFTER_S`` from another host), is run again under its run's
  name: its recorded steps replay, and a completed run is only marked so. A
  queued tick starts when no run of its schedule is going.

Thread rules: the loop runs in the thread that called :meth:`Scheduler.run`;
each run in a thread of its own, which marks its tick finished and leaves
``running`` under ``lock``. Storage calls are the storage's own (thread-safe).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

from ..errors import RunHeldError, error_text
from ..identity.ids import HOST
from ..primitives.clock import iso_us, utc_iso
from ..run.decoration import call_as_run, durable_of
from ..stores.schemes import open_storage
from ..stores.storage import Storage
from ..testing import env_clock
from .schedules import Schedule, schedules_of, tick_text, tick_time

#: Seconds between two looks at the clock. The loop sleeps in slices of this length,
#: re-reading the wall clock each time, because a sleep counts the monotonic clock,
#: which stops while a laptop is suspended: a scheduler notices a wake-up within one poll.
POLL_S = 1.0

#: Seconds after which a tick claimed by another host, whose run no live process holds,
#: is taken as orphaned and resumed here: that host's process may have died between its
#: claim and its run's start (on this host a dead pid says so at once).
RESUME_AFTER_S = 30.0

#: Run statuses that end a tick (``runs.status``): its row is marked so.
_ENDED = {"completed": "completed", "failed": "failed", "cancelled": "failed"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


class Scheduler:
    """Schedules started on one journal: ``step`` claims and resumes, ``run`` loops.

    ``path`` is the journal (a file, or a URL: ``postgresql://…``) for
    functions whose ``@durable`` gave none (None: ``$LETITLOOP_DB``, else the
    default file). ``clock`` gives seconds since the epoch (None:
    ``$LETITLOOP_TEST_CLOCK``'s file when set, else ``time.time``).
    ``report`` receives one line per tick started, resumed, skipped,
    finished or failed (None: nothing).
    """

    def __init__(
        self,
        schedules: list[Schedule],
        *,
        path: str | os.PathLike[str] | None = None,
        clock: Callable[[], float] | None = None,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.schedules = schedules
        self.path = path
        self.clock = clock or env_clock() or time.time
        self.report = report or (lambda line: None)
        self.by = f"{HOST}:{os.getpid()}"
        #: The ticks whose runs this process runs now: (schedule, tick) -> thread.
        self.running: dict[tuple[str, str], threading.Thread] = {}
        self.lock = threading.Lock()
        self._storages: dict[str | None, Storage] = {}
        self._cursors: dict[str, datetime] = {}
        self._kept = False

    # -- the journal -------------------------------------------------------------------

    def storage(self, s: Schedule) -> Storage:
        """The storage of ``s``'s journal (its decorator's ``path=``, else the scheduler's)."""
        where = durable_of(s.fn).options.path or self.path
        key = None if where is None else os.fspath(where)
        found = self._storages.get(key)
        if found is None:
            found = self._storages[key] = open_storage(where, "process")
        return found

    def close(self) -> None:
        """Wait for the runs this process started, then close the storages."""
        with self.lock:
            threads = list(self.running.values())
        for thread in threads:
            thread.join()
        for storage in self._storages.values():
            storage.close()
        self._storages.clear()

    def keep(self) -> None:
        """Record every schedule's definition; a new one's cursor is now (no back-fill)."""
        now = self.clock()
        for s in self.schedules:
            cursor = self.storage(s).keep_schedule(
                (
                    s.name,
                    s.goal,
                    s.cron,
                    s.tz,
                    s.catch_up,
                    s.window,
                    s.overlap,
                    utc_iso(now),
                    utc_iso(time.time()),
                )
            )
            self._cursors[s.name] = _utc(iso_us(cursor) / 1e6)
        self._kept = True

    # -- one look at the clock ---------------------------------------------------------

    def step(self) -> None:
        """Claim the due ticks of every schedule, start their runs, resume orphaned ones."""
        if not self._kept:
            self.keep()
        now = _utc(self.clock())
        for s in self.schedules:
            self._claim_due(s, now)
            self._resume(s)

    def _claim_due(self, s: Schedule, now: datetime) -> None:
        cursor = self._cursors[s.name]
        latest = s.latest_tick(now)
        if latest is None or latest <= cursor:
            return  # nothing came due since the cursor: no write
        storage = self.storage(s)
        # Another scheduler may have moved it: read it afresh (a write that changes nothing).
        cursor = _utc(iso_us(storage.move_cursor(s.name, utc_iso(cursor.timestamp()))) / 1e6)
        due = s.due(cursor, now)
        if due:
            self._claim(s, storage, due)
        moved = storage.move_cursor(s.name, utc_iso(latest.timestamp()))
        self._cursors[s.name] = _utc(iso_us(moved) / 1e6)

    def _claim(self, s: Schedule, storage: Storage, due: list[datetime]) -> None:
        """Claim ``due`` (oldest first) and run the ticks won, one after another in one
        thread: missed ticks caught up together never run at once. The overlap policy
        is decided once, against the runs that were going before them."""
        status = "started"
        if s.overlap != "allow":
            unfinished = storage.unfinished_ticks(s.name)
            if any(r[3] == "started" for r in unfinished):
                queued = any(r[3] == "queued" for r in unfinished)
                status = "queued" if s.overlap == "queue" and not queued else "skipped"
        won: list[tuple[str, str]] = []
        for tick in due:
            text, name = tick_text(tick), s.run_name(tick)
            row = (s.name, text, name, status, utc_iso(time.time()), self.by)
            if not storage.claim_tick(row):
                continue  # another scheduler claimed it
            if status == "started":
                self.report(f"{s.name}: tick {text} started run {name}")
                won.append((text, name))
            else:
                self.report(f"{s.name}: tick {text} {status} (a run of the schedule is going)")
                if status == "queued":
                    status = "skipped"  # one queued at most
        if won:
            self._start(s, storage, won)

    def _resume(self, s: Schedule) -> None:
        storage = self.storage(s)
        rows = storage.unfinished_ticks(s.name)
        going = False
        for _, text, name, status, claimed_at, claimed_by, _ in rows:
            if status != "started":
                continue
            with self.lock:
                if (s.name, text) in self.running:
                    going = True
                    continue
            run = storage.named_run(s.goal, name)
            if run is not None and run[1] in _ENDED:
                storage.set_tick(s.name, text, _ENDED[run[1]], utc_iso(time.time()), "started")
                continue
            going = True
            if run is not None and storage.is_run_held(run[0]):
                continue
            if not self._claimer_gone(claimed_by, claimed_at):
                continue
            self.report(f"{s.name}: tick {text} resumed run {name}")
            self._start(s, storage, [(text, name)])
        if going:
            return
        for _, text, name, status, _, _, _ in rows:
            if status == "queued" and storage.set_tick(s.name, text, "started", None, "queued"):
                self.report(f"{s.name}: queued tick {text} started run {name}")
                self._start(s, storage, [(text, name)])
                return

    def _claimer_gone(self, claimed_by: str, claimed_at: str) -> bool:
        host, _, pid = claimed_by.rpartition(":")
        if host == HOST and pid.isdigit():
            return int(pid) == os.getpid() or not _alive(int(pid))
        return time.time() - iso_us(claimed_at) / 1e6 > RESUME_AFTER_S

    # -- a tick's run ------------------------------------------------------------------

    def _start(self, s: Schedule, storage: Storage, ticks: list[tuple[str, str]]) -> None:
        """Run the ticks' runs ``(tick, run name)`` in order, in a thread of their own."""
        thread = threading.Thread(
            target=self._run_ticks,
            args=(s, storage, ticks),
            name=f"letitloop schedule {s.name} {ticks[0][0]}",
            daemon=True,
        )
        with self.lock:
            for text, _ in ticks:
                self.running[(s.name, text)] = thread
        thread.start()

    def _run_ticks(self, s: Schedule, storage: Storage, ticks: list[tuple[str, str]]) -> None:
        for text, name in ticks:
            try:
                self._run_tick(s, storage, text, name)
            finally:
                with self.lock:
                    self.running.pop((s.name, text), None)

    def _run_tick(self, s: Schedule, storage: Storage, text: str, name: str) -> None:
        status: str | None = "failed"
        try:
            called = call_as_run(s.fn, name, self.path, s.call_args(tick_time(text)), {})
            if inspect.iscoroutine(called):
                asyncio.run(called)
            status = "completed"
        except RunHeldError:
            status = None  # another process holds the run: it finishes the tick
        except Exception as exc:
            self.report(f"{s.name}: run {name} failed: {error_text(exc)}")
        if status is not None:
            storage.set_tick(s.name, text, status, utc_iso(time.time()), "started")
            if status == "completed":
                self.report(f"{s.name}: run {name} completed")

    # -- the loop ----------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None, poll: float = POLL_S) -> None:
        """Step every ``poll`` seconds until ``stop`` is set (or KeyboardInterrupt), then
        wait for the runs started here and close the journals."""
        stop = stop or threading.Event()
        try:
            self.keep()
            for s in self.schedules:
                self.report(
                    f"{s.name}: scheduling goal {s.goal} at '{s.cron}' in {s.tz} "
                    f"(catch_up={s.catch_up}, overlap={s.overlap})"
                )
            while not stop.is_set():
                self.step()
                stop.wait(poll)
        finally:
            self.close()


def run_schedules(
    *targets: object,
    path: str | os.PathLike[str] | None = None,
    clock: Callable[[], float] | None = None,
    poll: float = POLL_S,
    stop: threading.Event | None = None,
    report: Callable[[str], None] | None = None,
) -> None:
    """Run the schedules of ``targets`` (Schedules, ``@schedule`` functions, modules) until
    ``stop`` is set or the process is interrupted.

    Run it in as many processes (and hosts, on PostgreSQL) as you like: each
    tick's run starts once. ``path`` is the journal for functions whose
    ``@durable`` gave none; ``poll`` the seconds between two looks at the
    clock; ``report`` receives a line per tick (None: stderr). Raises
    MisuseError when ``targets`` hold no schedule.
    """
    from ..errors import MisuseError

    found = [s for t in targets for s in schedules_of(t)]
    if not found:
        raise MisuseError(
            "run_schedules() found no schedule: pass @schedule functions, Schedule objects "
            "or a module that holds them"
        )
    line = report or (lambda text: print(text, file=sys.stderr, flush=True))
    Scheduler(found, path=path, clock=clock, report=line).run(stop, poll)
