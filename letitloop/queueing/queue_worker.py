"""Queue workers: threads that claim a queue's entries and run each as a run, in processes.

``Worker(queue, threads=2, processes=2).run()`` (and ``lil worker MODULE
--queue NAME``) is a supervisor process that forks ``processes`` worker
processes and starts again one that died; each runs ``threads`` worker
threads. ``Worker(queue).start()`` runs the threads in the calling process
instead (a small app's background worker), ``stop()`` ends them.

- **A worker thread** claims an entry (``SqliteQueue.claim``: the limits, the
  entry's lock), opens ``Journal(task, run=<the entry's run name>)`` on the
  queue's journal and calls the registered function inside it, so its
  ``step()`` calls are journaled; then ends the entry with the run's result,
  its error, or its cancel. An idle thread looks again every
  ``queue_records.POLL_SECONDS``: an entry whose holder died (its lock free)
  is taken over at that look. It looks at once when an entry is added (by
  this process; on PostgreSQL by any, over LISTEN/NOTIFY: ``listening.py``).
- **SIGTERM (or SIGINT) drains**: no new claim; each run in progress is let go
  of at its next step (``Cancel.release``: the step in flight finishes and is
  recorded, the next one raises RunReleasedError), its journal closed without
  marking the run, and its entry queued again for another worker, at once.
- **A worker process that dies** (SIGKILL, OOM) loses nothing: its entries'
  locks and its runs' locks go with it, another worker takes the entries
  over, and its supervisor starts a new process.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from .. import codec
from ..errors import LetItLoopError, RunCancelledError, RunReleasedError, error_text
from ..run import cancellation
from ..run.journal import Journal
from . import children, rate_limits
from .queue_records import WAKEUPS, Claimed

if TYPE_CHECKING:
    from ..stores.postgres.listening import Listener
    from .queues import Queue

#: Longest nap of an idle worker thread between two looks (a limit's wait is cut to it).
MAX_NAP = 0.1
#: A worker process that exited on its own within this many seconds of its start is
#: started again only after a backoff (doubling up to RESTART_CEILING), so a crash loop
#: does not spin; one killed by a signal is started again at once.
QUICK_DEATH = 1.0
RESTART_CEILING = 10.0
#: The longest a parent suspended for its child waits before it looks at the child again,
#: if the child's end did not make it due first (``children.py``): 0.5 s after its first
#: claim, doubling with each claim.
CHILD_RECHECK = 5.0


class Worker:
    """Worker threads for one queue, in this process (``start``) or in processes (``run``)."""

    def __init__(self, queue: Queue, *, threads: int = 1, processes: int = 1) -> None:
        for what, n in (("threads", threads), ("processes", processes)):
            if type(n) is not int or n < 1:
                raise LetItLoopError(f"Worker: {what} must be a whole number 1 or more, got {n!r}")
        self.queue = queue
        self.threads = threads
        self.processes = processes
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._running: set[Journal] = set()
        #: The entries this worker's threads hold, by id (their leases renewed on PostgreSQL).
        self._held: dict[str, Claimed] = {}
        self._threads: list[threading.Thread] = []
        self._listener: Listener | None = None
        self._active = 0  # worker threads not ended yet
        #: Entries this worker ended or let go of, by outcome (what tests and lil read).
        self.counts: dict[str, int] = {}

    # -- in this process -------------------------------------------------------

    def start(self) -> Worker:
        """Start the worker threads in this process (daemon threads); returns self."""
        lease = getattr(self.queue.store, "lease", None)
        if lease is not None:  # PostgreSQL: one thread renews the leases of the entries held
            threading.Thread(
                target=self._renew, args=(lease / 3,), name="letitloop-lease", daemon=True
            ).start()
        # PostgreSQL: a session that LISTENs, to wake the idle threads (stopped by the last).
        self._listener = self.queue.store.listener()
        self._active = self.threads
        for i in range(self.threads):
            t = threading.Thread(
                target=self._loop, name=f"letitloop-worker-{self.queue.name}-{i}", daemon=True
            )
            self._threads.append(t)
            t.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Drain: claim nothing more, let go of each run at its next step, wait for the threads."""
        self.drain("the worker was stopped")
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self._listener is not None and not self.alive:  # stopped by the last thread
            self._listener.join(5.0 if deadline is None else max(0.0, deadline - time.monotonic()))

    def drain(self, reason: str) -> None:
        """Claim nothing more; each run in progress stops at its next step, unmarked."""
        self._stopping.set()
        WAKEUPS.wake(self.queue.name)  # the idle threads stop waiting
        with self._lock:
            running = list(self._running)
        for j in running:
            j._cancel.release(reason)

    @property
    def alive(self) -> bool:
        """Whether a worker thread still runs."""
        return any(t.is_alive() for t in self._threads)

    def serve(self) -> int:
        """Run the threads in this process until SIGTERM or SIGINT drains them; exit status 0."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.drain(f"the worker got signal {_[0]}"))
        self.start()
        while self.alive:
            for t in self._threads:
                t.join(0.2)
        return 0

    def _loop(self) -> None:
        try:
            self._claim_and_run()
        finally:
            with self._lock:
                self._active -= 1
                last = self._active == 0
            if last and self._listener is not None:
                self._listener.stop()

    def _claim_and_run(self) -> None:
        store, queue = self.queue.store, self.queue
        while not self._stopping.is_set():
            try:
                token = WAKEUPS.token(queue.name)  # taken before the look: none is missed
                got = store.claim(queue.name, queue.limits, time.time())
            except LetItLoopError as exc:  # the file busy past its timeout, full, ...
                print(f"letitloop worker: {exc}", file=sys.stderr, flush=True)
                self._stopping.wait(MAX_NAP)
                continue
            if not isinstance(got, Claimed):
                if not self._stopping.is_set():  # woken by an entry added, else polls
                    WAKEUPS.wait(queue.name, token, min(got, MAX_NAP))
                continue
            if self._stopping.is_set():
                store.release(got)
                break
            with self._lock:
                self._held[got.id] = got
            try:
                self._count(self._run(got))
            finally:
                with self._lock:
                    self._held.pop(got.id, None)

    def _renew(self, every: float) -> None:
        while not self._stopping.is_set() or self.alive:
            time.sleep(every)
            with self._lock:
                held = list(self._held.values())
            try:
                self.queue.store.renew(held, time.time())
            except LetItLoopError as exc:  # the server away: the next renewal tries again
                print(f"letitloop worker: {exc}", file=sys.stderr, flush=True)

    def _count(self, outcome: str) -> None:
        with self._lock:
            self.counts[outcome] = self.counts.get(outcome, 0) + 1

    def _run(self, claimed: Claimed) -> str:
        """Run one claimed entry as its run; what became of it."""
        queue, store = self.queue, self.queue.store
        fn = queue.tasks.get(claimed.task)
        if fn is None:
            known = ", ".join(sorted(queue.tasks)) or "none"
            why = (
                f"QueueError: no task {claimed.task!r} is registered on queue {queue.name!r} in "
                f"this worker (registered: {known}); import the module that registers it"
            )
            store.finish(claimed, "failed", None, why, time.time())
            return "failed"
        try:
            args, kwargs = codec.decode(claimed.args, queue.registry)
        except LetItLoopError as exc:
            store.finish(claimed, "failed", None, error_text(exc), time.time())
            return "failed"
        j = Journal(
            claimed.task,
            run=claimed.run_name,
            path=queue.path,
            durability=queue.durability,
            registry=queue.registry,
            timeout=queue.timeout,
            version=_version(fn),
        )
        opened = False
        try:
            with j:
                opened = True
                with self._lock:
                    self._running.add(j)
                if self._stopping.is_set():
                    j._cancel.release("the worker stops")
                mine, cancel = store.started(claimed, j.run_id, time.time())
                if not mine:  # taken over meanwhile: its writes are fenced, so stop here
                    j._cancel.release("another worker took the entry over")
                elif cancel:
                    cancellation.check(j)
                if j.was_completed:
                    value = j.recorded_result()
                else:
                    token = children.worker_run.set(j)  # a wait for a child suspends it
                    try:
                        value = _call(j, fn, args, kwargs)
                    finally:
                        children.worker_run.reset(token)
                    j.set_result(value)
        except _Suspended as suspended:
            why = error_text(suspended.cause)
            store.release(claimed, time.time() + suspended.seconds, why)
            return "suspended"
        except RunReleasedError:
            return _let_go(store, claimed, j)
        except RunCancelledError as exc:
            store.finish(claimed, "cancelled", None, error_text(exc), time.time())
            return "cancelled"
        except Exception as exc:
            if not opened:  # the run could not be opened (held, the journal busy): not its failure
                print(f"letitloop worker: {error_text(exc)}", file=sys.stderr, flush=True)
                store.release(claimed)
                self._stopping.wait(MAX_NAP)
                return "released"
            if j._cancel.released and children.waiting.get(id(j)):  # it caught its wait's
                return _let_go(store, claimed, j)  # error, then raised another
            store.finish(claimed, "failed", None, error_text(exc), time.time())
            return "failed"
        except BaseException:
            store.release(claimed)  # KeyboardInterrupt, SystemExit: not the run's failure
            raise
        finally:
            with self._lock:
                self._running.discard(j)
        if j._cancel.released and children.waiting.get(id(j)):  # it caught its wait's error
            return _let_go(store, claimed, j)
        store.finish(claimed, "completed", codec.encode(value, queue.registry), None, time.time())
        return "completed"

    # -- in processes ----------------------------------------------------------

    def run(self) -> int:
        """Serve until SIGTERM or SIGINT: in this process (``processes=1``), else in that many
        forked worker processes, each started again when it dies; exit status 0 once drained."""
        if self.processes == 1:
            return self.serve()
        return _Supervisor(self).loop()


class _Supervisor:
    """The parent of a worker's processes: forks them, starts again one that dies, drains."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.children: dict[int, float] = {}  # pid -> when it started
        self.stopping = False
        self.backoff = 0.0

    def fork(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        # SIGTERM and SIGINT wait while a child is forked and counted: one that came in
        # between would stop every child but the new one, and the loop would wait for it
        # forever (and the new child would run the parent's handler).
        stops = {signal.SIGTERM, signal.SIGINT}
        signal.pthread_sigmask(signal.SIG_BLOCK, stops)
        try:
            pid = os.fork()
            if pid == 0:
                for sig in stops:
                    signal.signal(sig, signal.SIG_DFL)
            else:
                self.children[pid] = time.monotonic()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        if pid == 0:  # the worker process: its own threads, its own connections
            code = 1
            try:
                w = self.worker
                code = Worker(w.queue, threads=w.threads).serve()
            except BaseException as exc:  # a worker process never returns into the parent's code
                print(f"letitloop worker: {error_text(exc)}", file=sys.stderr, flush=True)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)

    def stop(self, signum: int, _frame: Any) -> None:
        self.stopping = True
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    def loop(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.stop)
        for _ in range(self.worker.processes):
            self.fork()
        while self.children:
            pid, status = os.wait()
            started = self.children.pop(pid, None)
            if started is None or self.stopping:
                continue
            # Killed by a signal (SIGKILL, the OOM killer): started again at once, its
            # entries being taken over meanwhile. One that exits on its own soon after its
            # start (a bug at each start) waits first, longer each time.
            quick = not os.WIFSIGNALED(status) and time.monotonic() - started < QUICK_DEATH
            self.backoff = min(RESTART_CEILING, max(0.1, self.backoff * 2)) if quick else 0.0
            if self.backoff:
                time.sleep(self.backoff)
            if not self.stopping:
                self.fork()
        return 0


def _let_go(store: Any, claimed: Claimed, j: Journal) -> str:
    """Give back the entry of run ``j``, which was let go of: due when the child it waits
    for ends (``children.py``), else at once (a drain)."""
    child = children.waited_child(j)
    if child is None:
        store.release(claimed)
        return "released"
    due = time.time() + min(CHILD_RECHECK, 0.25 * 2 ** min(claimed.attempt, 5))
    store.release(claimed, due, f"waiting for its child entry {child}", child=child)
    return "waiting"


class _Suspended(Exception):
    """A run a rate limit stopped: let go of, unmarked, its entry due again in ``seconds``."""

    def __init__(self, seconds: float, cause: Exception) -> None:
        super().__init__(f"suspended for {seconds:g} s: {cause}")
        self.seconds = seconds
        self.cause = cause


def _call(j: Journal, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """The task's call in its run; a rate limit it met (``rate_limits.retry_after``) lets go
    of the run, unmarked (``_Suspended``), instead of failing it."""
    try:
        value = fn(*args, **kwargs)
        if inspect.iscoroutine(value):  # an async task: run on a loop of its own
            value = asyncio.run(value)
        return value
    except Exception as exc:
        seconds = rate_limits.retry_after(exc)
        if seconds is None:
            raise
        j._cancel.release(f"rate limited, due again in {seconds:g} s")
        if not j._cancel.released:  # cancelled meanwhile: the cancel wins
            raise
        raise _Suspended(seconds, exc) from exc


def _version(fn: Any) -> str | None:
    from ..identity.versions import source_version

    code = getattr(fn, "__code__", None)
    return None if code is None else source_version(code.co_filename)
