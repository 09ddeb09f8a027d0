"""``Journal``: runs, steps, replay and step keys.

A journal is one goal's open run in one process. Opening it resumes the
goal's newest unfinished run (or the named run), holds it against other
processes, and loads the run's recorded steps so that replay is a dict
lookup. ``step()`` replays a recorded result without calling the function,
or calls it and commits its result before returning it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from functools import partial
from pathlib import Path
from types import FunctionType, TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from . import cancellation, codec, inflight, locks, sleeps, waits
from . import retry as retries
from .costs import NO_USAGE, Usage
from .errors import (
    DecodeError,
    EncodeError,
    InvalidNameError,
    JournalFileError,
    LetItLoopError,
    RunHeldError,
    StepMismatchError,
    error_text,
    traceback_text,
)
from .fingerprint import UNCHECKED, Fingerprinter, differences, unwrap
from .ids import HOST as _HOST
from .ids import new_run_id
from .keys import NEST, REPEAT_SUFFIX, Recorded, StepKeys, split_key
from .markers import AtomicMarker, Scope
from .retry import RetryPolicy
from .store import (
    MAX_NAME_LENGTH,
    Durability,
    Store,
    check_name,
    close_store,
    open_store,
    utc_iso,
)

if TYPE_CHECKING:
    import asyncio

    import filelock

    from .commits import LoopCommits

T = TypeVar("T")

#: Default seconds a journal waits for a run held by another live process.
DEFAULT_TIMEOUT = 10.0

#: The innermost open journal of the current context (thread or task); what the
#: free functions step() and atomic_marker() use.
current_journal: ContextVar[Journal | None] = ContextVar("letitloop_journal", default=None)

#: The step whose function is running in this context, as (journal, key): a
#: step called inside it is keyed under it (``outer/inner``).
_parent_step: ContextVar[tuple[Journal, str] | None] = ContextVar(
    "letitloop_parent_step", default=None
)

# Runs held by journals of this process: (journal file identity, run id) -> the
# thread that opened it. A second journal on the same run waits for it like a
# journal of another process would, except in the very thread that holds it,
# where waiting could never end.
_held: dict[tuple[tuple[int, int], str], int] = {}
_open_journals: list[Journal] = []
_registry_lock = threading.Lock()

#: ``Journal(goal)`` without ``input=``: the run records no input.
_NO_INPUT: Any = object()


def _watch_attempt() -> int | None:
    """The supervisor's attempt number (``lil watch`` sets LETITLOOP_ATTEMPT), if any."""
    text = os.environ.get("LETITLOOP_ATTEMPT")
    if text is None or not text.isdigit():
        return None
    return int(text)


def run_lock_path(store: Store, run_id: str) -> Path:
    """The lock file a process holds while it has ``run_id`` open (see ``lil reset``).

    Named by the run id alone, in the lock folder beside the real journal
    file: every path that reaches the file reaches this lock.
    """
    return store.lock_file("run", run_id)


def encode_input(value: Any, registry: codec.CodecRegistry | None) -> str:
    """A run's input as codec JSON text; parts the codec cannot encode become their type names.

    Never raises for an unencodable value: recording what a run was called
    with must not prevent the call.
    """
    try:
        return codec.encode(value, registry)
    except EncodeError:
        pass
    if type(value) is dict:
        safe: dict[Any, Any] = {}
        for k, v in value.items():
            try:
                codec.encode(v, registry)
            except EncodeError:
                v = _type_label(v)
            safe[k if type(k) is str else _type_label(k)] = v
        with contextlib.suppress(EncodeError):
            return codec.encode(safe, registry)
    return codec.encode(_type_label(value), registry)


def _type_label(value: Any) -> str:
    t = type(value)
    return f"<{t.__module__}.{t.__qualname__}>"


def function_name(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of a step's function (the code identity checked on replay)."""
    if type(fn) is FunctionType:  # the common case, without the lookups below
        return f"{fn.__module__}.{fn.__qualname__}"
    while isinstance(fn, partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)  # bound methods: their function
    qualname = getattr(fn, "__qualname__", None)
    if qualname is None:  # a callable object
        qualname = type(fn).__qualname__
        module = type(fn).__module__
    else:
        module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{qualname}"


_UPSERT_STEP = (
    'INSERT INTO "{table}" (run, key, kind, status, fn, result, started_at, finished_at, '
    "duration_ms, attempt, error, traceback, args_fp, input_tokens, output_tokens, cost, model) "
    "VALUES (?, ?, 'step', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET status = excluded.status, fn = excluded.fn, "
    "result = excluded.result, started_at = excluded.started_at, "
    "finished_at = excluded.finished_at, duration_ms = excluded.duration_ms, "
    "attempt = excluded.attempt, error = excluded.error, traceback = excluded.traceback, "
    "args_fp = excluded.args_fp, input_tokens = excluded.input_tokens, "
    "output_tokens = excluded.output_tokens, cost = excluded.cost, model = excluded.model, "
    "wake_at = NULL"
)

#: Results read per query when a run replays: replays mostly come in journal
#: order, so one query serves this many of them, and no more than this many
#: result texts are held in memory at once.
_RESULT_CHUNK = 256


class _Results:
    """Reads recorded results when they are replayed, a chunk at a time, in journal order.

    Only keys, fingerprints and rowids of a run's steps stay in memory for
    the attempt; a result's text is read when its step replays and dropped
    once handed back, so memory does not grow with the number of steps.
    """

    def __init__(self, store: Store, table: str, rowids: list[int]) -> None:
        self.store = store
        self.table = table
        self.rowids = rowids  # ascending
        self.cache: dict[int, str | None] = {}

    def get(self, rowid: int) -> str | None:
        cache = self.cache
        if rowid in cache:
            return cache.pop(rowid)
        i = bisect_left(self.rowids, rowid)
        chunk = self.rowids[i : i + _RESULT_CHUNK]
        if not chunk or chunk[0] != rowid:
            chunk = [rowid]
        marks = ",".join("?" * len(chunk))
        rows = self.store.query(
            f'SELECT rowid, result FROM "{self.table}" WHERE rowid IN ({marks})', chunk
        )
        self.cache = cache = dict(rows)
        if rowid not in cache:
            raise DecodeError(
                f"the recorded row {rowid} of {self.table} is gone: was the run reset "
                f"while this process held it?"
            )
        return cache.pop(rowid)


class Journal:
    """One goal's run, held by this process while open.

    ``Journal(goal)`` resumes the goal's newest unnamed run that has not
    completed (crashed or failed) and was opened for the same ``input=``
    (none by default), or starts a new one. ``Journal(goal, run="key")``
    names the run: the same key always means the same run, and a completed
    run replays every step. Use it as a context manager: a clean exit (or
    ``sys.exit(0)``) marks the run completed, an exception marks it failed
    with its error (the next open resumes it from the failed step).

    ``clock`` is the function timestamps come from (seconds since the epoch;
    tests pass a fake one). ``registry`` is the codec registry for results.
    ``retry`` is the RetryPolicy of every step that does not pass its own.

    Raises RunHeldError when another live process holds the run for longer
    than ``timeout`` seconds, JournalFileError when the file is unusable,
    SchemaVersionError when it comes from a newer letitloop.
    """

    def __init__(
        self,
        goal: str,
        *,
        run: str | None = None,
        path: str | os.PathLike[str] | None = None,
        durability: Durability = "process",
        timeout: float = DEFAULT_TIMEOUT,
        registry: codec.CodecRegistry | None = None,
        clock: Callable[[], float] = time.time,
        input: Any = _NO_INPUT,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.goal = check_name("goal", goal)
        self.run_name = None if run is None else check_name("run", run)
        #: What the run is opened for (recorded on a new run; unnamed openers
        #: resume only a run opened for the same input).
        self.input = None if input is _NO_INPUT else input
        self._has_input = input is not _NO_INPUT
        if durability not in ("process", "power"):
            raise ValueError(f"durability must be 'process' or 'power', got {durability!r}")
        self._path_arg = path
        self.durability: Durability = durability
        self.timeout = timeout
        self.registry = registry
        self.clock = clock
        self.store: Store | None = None
        self.run_id: str = ""
        self.attempt = 0
        self.table = ""
        #: True when the run had already completed when this journal opened it.
        self.was_completed = False
        self._recorded_result: str | None = None
        self._result_text: str | None = None
        self._keys = StepKeys("")
        self._results: _Results | None = None
        self._fingerprints = Fingerprinter(registry)
        # The group commit of async steps, bound to the loop that made it.
        self._loop_commits: LoopCommits | None = None
        self._keys_lock = threading.Lock()
        self._lock: filelock.BaseFileLock | None = None
        self._held_key: tuple[tuple[int, int], str] | None = None
        self._tokens: list[Any] = []
        self._upsert_sql = ""  # the step-row statement for self.table, set on open
        # Fresh steps in flight, key -> (started, fn, fp), and this journal's entry in
        # the process's watcher that makes a long one visible to other processes
        # (letitloop/inflight.py; registered by the first fresh step).
        self._in_flight: dict[str, tuple[float, str, str]] = {}
        self._flight_watch: inflight.Watched | None = None
        #: The retry policy of steps that pass none (letitloop/retry.py), and the
        #: run's failed tries, read on first use (None: not read yet).
        self.retry = retry
        self._tries: retries.History | None = None
        #: Usage reported by the functions of the steps in flight, by key (costs.py).
        self._usage: dict[str, Usage] = {}
        #: Why the run was cancelled, once this process knows (cancellation.py); then the
        #: next step raises RunCancelledError. And the tasks awaiting an async step.
        self._cancel: str | None = None
        self._aio_tasks: dict[Any, str] = {}

    # -- opening and closing -------------------------------------------------

    @property
    def path(self) -> Path:
        """The journal file."""
        return self.store.path if self.store else Path(self._path_arg or "")

    @property
    def is_open(self) -> bool:
        return self.store is not None

    def open(self) -> Journal:
        """Resume or start the run and hold it. Idempotent; ``with`` calls it for you."""
        if self.store is not None:
            return self
        store = open_store(self._path_arg, durability=self.durability)
        try:
            self._open_run(store)
        except BaseException:
            self._release()
            close_store(store)
            raise
        self.store = store
        with _registry_lock:
            _open_journals.append(self)
        return self

    def _open_run(self, store: Store) -> None:
        input_text = input_fp = None
        if self._has_input:
            input_text = encode_input(self.input, self.registry)
            input_fp = self._fingerprints.whole(self.input)
        while True:
            now = self.clock()
            with store.write() as c:
                self.table = store.ensure_goal(c, self.goal, now)
                self._upsert_sql = _UPSERT_STEP.format(table=self.table)
                if self.run_name is not None:
                    row = c.execute(
                        "SELECT id FROM runs WHERE goal = ? AND name = ?",
                        (self.goal, self.run_name),
                    ).fetchone()
                else:
                    # Unnamed openers resume only unnamed runs opened for the same
                    # input (named runs are reached by their name).
                    row = c.execute(
                        "SELECT id FROM runs WHERE goal = ? AND name IS NULL AND input_fp IS ? "
                        # rowid: the order runs were made in (ids made in one
                        # millisecond sort in no particular order).
                        # A run cancelled, or asked to be, is never resumed by an opener.
                        "AND status IN ('running', 'failed', 'waiting') "
                        "AND cancel_requested_at IS NULL ORDER BY rowid DESC LIMIT 1",
                        (self.goal, input_fp),
                    ).fetchone()
                if row:
                    run_id = str(row[0])
                else:
                    run_id = new_run_id(now)
                    # Held before its row exists (nobody else knows this id, so it is
                    # free at once): if the lock file cannot be made, the transaction
                    # rolls back and no run is left behind. A new run is then written
                    # whole in this one transaction: its row and its first attempt.
                    self._hold(store, run_id)
                    started = utc_iso(now)
                    c.execute(
                        "INSERT INTO runs (id, goal, name, status, attempts, holder_pid, "
                        "holder_host, started_at, updated_at, input, input_fp) "
                        "VALUES (?, ?, ?, 'running', 1, ?, ?, ?, ?, ?, ?)",
                        (
                            run_id,
                            self.goal,
                            self.run_name,
                            os.getpid(),
                            _HOST,
                            started,
                            started,
                            input_text,
                            input_fp,
                        ),
                    )
                    self._insert_attempt(c, run_id, 1, started)
            if row is None:
                self.run_id = run_id
                self.attempt = 1
                self._new_run(store)
                return
            if self._lock is None:
                self._hold(store, run_id)
            now = self.clock()
            with store.write() as c:
                found = c.execute(
                    "SELECT status, attempts, result, name, cancel_requested_at, cancel_reason "
                    "FROM runs WHERE id = ?",
                    (run_id,),
                ).fetchone()
                # The rules apply afresh to what we find after waiting for a holder:
                # a run forgotten meanwhile ('lil reset', 'lil gc'), a name handed to
                # a fork ('lil fork'), or an unnamed run that its holder completed or
                # that was cancelled (an unnamed opener then starts a new run) means:
                # look again. A named run that was cancelled is refused (cancellation.py).
                status, attempts, result, name, cancel_at, why = found or (
                    ("completed", 0, None, None, None, None)
                )
                cancelled = status == "cancelled" or (
                    cancel_at is not None and status != "completed"
                )
                retry = (
                    found is None
                    or name != self.run_name
                    or (status == "completed" and self.run_name is None)
                    or (cancelled and self.run_name is None)
                )
                if cancelled and not retry:
                    self.run_id, self._cancel = run_id, f"{why or 'cancelled'}, at {cancel_at}"
                    c.execute(
                        "UPDATE runs SET status = 'cancelled', finished_at = coalesce("
                        "finished_at, ?), updated_at = ? WHERE id = ? AND status != 'cancelled'",
                        (cancel_at or utc_iso(now), utc_iso(now), run_id),
                    )
                elif not retry:
                    self.was_completed = status == "completed"
                    self._recorded_result = result
                    if not self.was_completed:
                        attempts += 1
                        c.execute(
                            "UPDATE runs SET status = 'running', attempts = ?, holder_pid = ?, "
                            "holder_host = ?, updated_at = ? WHERE id = ?",
                            (attempts, os.getpid(), _HOST, utc_iso(now), run_id),
                        )
                        self._insert_attempt(c, run_id, attempts, utc_iso(now))
            if retry:
                self._release()
                continue
            if cancelled:
                raise cancellation.error(self)  # open() releases the run
            self.run_id = run_id
            self.attempt = max(attempts, 1)
            self._load_steps(store)
            return

    @staticmethod
    def _insert_attempt(c: Any, run_id: str, attempt: int, started: str) -> None:
        c.execute(
            "INSERT OR REPLACE INTO attempts (run, attempt, pid, host, watch_id, "
            "watch_attempt, started_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                attempt,
                os.getpid(),
                _HOST,
                os.environ.get("LETITLOOP_WATCH_ID"),
                _watch_attempt(),
                started,
            ),
        )

    def _new_run(self, store: Store) -> None:
        """A run just created: nothing recorded to load."""
        self._keys = StepKeys(self.run_id)
        self._results = _Results(store, self.table, [])
        self._tries = {}

    def _hold(self, store: Store, run_id: str) -> None:
        key = (store.identity, run_id)
        me = threading.get_ident()
        with _registry_lock:
            if _held.get(key) == me:
                raise RunHeldError(
                    f"run {run_id} of goal {self.goal!r} is already open in this thread "
                    f"(pid {os.getpid()}), by a Journal that is still open around this one; "
                    f"waiting for it would never end. Close the other Journal first, or name "
                    f"a different run",
                    run_id=run_id,
                    pid=os.getpid(),
                    host=_HOST,
                )
        # Another journal of this process holding the run (another thread, a task
        # whose opener runs in a worker thread) is waited for like another
        # process: its lock file descriptor is its own, and flock excludes
        # descriptors, not processes.
        lock = locks.new_lock(run_lock_path(store, run_id))
        if not locks.acquire(lock, self.timeout):
            with _registry_lock:
                thread = _held.get(key)
            pid: int | None
            host: str | None
            if thread is not None:
                holder = f"another Journal of this process (pid {os.getpid()}, thread {thread})"
                pid, host = os.getpid(), _HOST
            else:
                rows = store.query(
                    "SELECT holder_pid, holder_host, updated_at FROM runs WHERE id = ?", (run_id,)
                )
                pid, host, since = rows[0] if rows else (None, None, None)
                holder = f"process {pid} on {host} (since {since})"
            raise RunHeldError(
                f"run {run_id} of goal {self.goal!r} is held by {holder}; waited "
                f"{self.timeout:g} s. Wait for it to finish, stop it, or pass a longer timeout=",
                run_id=run_id,
                pid=pid,
                host=host,
            )
        with _registry_lock:
            _held[key] = me
        self._held_key = key
        self._lock = lock

    def _release(self) -> None:
        if self._held_key is not None:
            with _registry_lock:
                _held.pop(self._held_key, None)
            self._held_key = None
        if self._lock is not None:
            lock, self._lock = self._lock, None
            locks.release(lock)

    def _load_steps(self, store: Store) -> None:
        """Load the keys, functions and fingerprints of the run's done steps (not their results)."""
        rows = store.query(
            f'SELECT key, fn, args_fp, rowid FROM "{self.table}" WHERE run = ? '
            f"AND kind IN ('step', 'sleep', 'wait') AND status = 'done' ORDER BY rowid",
            (self.run_id,),
        )
        keys = StepKeys(self.run_id)
        keys.load([Recorded(*r) for r in rows])
        markers = store.query(
            f"SELECT key FROM \"{self.table}\" WHERE run = ? AND kind = 'marker'", (self.run_id,)
        )
        keys.marker_keys = {key for (key,) in markers}
        self._keys = keys
        self._results = _Results(store, self.table, sorted(r[3] for r in rows))

    def close(self, exc: BaseException | None = None) -> None:
        """Mark the run completed (``exc`` is None) or failed with ``exc``, and release it.

        ``sys.exit(0)`` (``SystemExit`` with code 0 or None) is a clean exit,
        not a failure: the run is completed. Any other exception, including
        KeyboardInterrupt and a non-zero SystemExit, marks it failed with its
        error, so the next open resumes it. Two endings are not failures:
        RunWaiting (``wait_for(..., stop_after=)``) leaves the run ``waiting``,
        and a run this process learnt was cancelled is marked ``cancelled``
        however the block ended.
        """
        store = self.store
        if store is None:
            return
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            exc = None
        try:
            if not self.was_completed:
                now = utc_iso(self.clock())
                if self._cancel is not None:
                    store.write1(
                        "UPDATE runs SET status = 'cancelled', finished_at = ?, updated_at = ?, "
                        "error = ? WHERE id = ?",
                        (now, now, error_text(cancellation.error(self)), self.run_id),
                    )
                elif isinstance(exc, waits.RunWaiting) and exc.run_id == self.run_id:
                    store.write1(
                        "UPDATE runs SET status = 'waiting', updated_at = ? WHERE id = ?",
                        (now, self.run_id),
                    )
                elif exc is None:
                    store.write1(
                        "UPDATE runs SET status = 'completed', finished_at = ?, updated_at = ?, "
                        "result = ?, error = NULL WHERE id = ?",
                        (now, now, self._result_text, self.run_id),
                    )
                else:
                    store.write1(
                        "UPDATE runs SET status = 'failed', updated_at = ?, error = ? WHERE id = ?",
                        (now, error_text(exc), self.run_id),
                    )
        finally:
            watched, self._flight_watch = self._flight_watch, None
            if watched is not None:
                inflight.WATCH.forget(watched)  # nothing more is written for this run
            self._release()
            close_store(store)
            self.store = None
            with _registry_lock:
                if self in _open_journals:
                    _open_journals.remove(self)

    def __enter__(self) -> Journal:
        self.open()
        self._tokens.append(current_journal.set(self))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._tokens:
            current_journal.reset(self._tokens.pop())
        self.close(exc)

    async def __aenter__(self) -> Journal:
        """Open like ``with``, waiting for a held run in a worker thread (the loop keeps running).

        If the awaiting task is cancelled while the worker still waits, the
        journal is closed (its run marked failed) as soon as the worker gets it.
        """
        import asyncio

        opening = asyncio.ensure_future(asyncio.to_thread(self.open))
        try:
            await asyncio.shield(opening)
        except asyncio.CancelledError:
            opening.add_done_callback(self._close_if_opened)
            raise
        self._tokens.append(current_journal.set(self))
        return self

    def _close_if_opened(self, opening: asyncio.Future[Journal]) -> None:
        import asyncio

        if not opening.cancelled() and opening.exception() is None:
            self.close(asyncio.CancelledError())

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close like ``with``, once every returned step's row is committed.

        Rows still queued for the group commit or in its thread are committed
        first; the loop keeps running meanwhile, and a cancellation waits for
        them, then propagates. A commit that failed with no task left to hear
        of it (its task was cancelled while it waited) marks the run failed and
        is raised here as JournalFileError. With ``durability="power"`` the
        run's closing commit runs in the commit thread too: no fsync on the loop.
        """
        import asyncio

        from .commits import wait_through_cancel

        if self._tokens:
            current_journal.reset(self._tokens.pop())
        store = self.store
        if store is None:
            return
        commits = self._loop_commits
        if commits is not None and (commits.store is not store or not commits.on_this_loop()):
            commits = None  # another loop's: its thread ends when idle
        if commits is None and self.durability == "power" and not self.was_completed:
            commits = self._loop_commits_for(store)
        cancelled = False
        lost: JournalFileError | None = None
        try:
            if commits is not None:
                cancelled = await commits.settle()
                commits.closed = True  # a step returning from now on is not recorded
                for row, error in commits.unreported:
                    if row[2] == "done":
                        lost = JournalFileError(
                            f"run {self.run_id} of goal {self.goal!r} was not marked completed: "
                            f"step {row[1]!r} returned, but its commit failed after its task "
                            f"was cancelled ({error}); the run is marked failed and the step "
                            f"runs again on the next attempt. Fix the cause and run again",
                            path=str(store.path),
                        )
                        break
            failure = exc if exc is not None else lost
            if commits is not None and not commits.inline:
                closing = commits.run_in_thread(self.close, failure)
                cancelled |= await wait_through_cancel(closing)
                closing.result()
            else:
                self.close(failure)
        finally:
            if commits is not None:
                commits.stop()
            if self._loop_commits is commits:
                self._loop_commits = None
        if cancelled:
            raise asyncio.CancelledError
        if lost is not None and exc is None:
            raise lost

    def __repr__(self) -> str:
        state = f"run {self.run_id} attempt {self.attempt}" if self.store else "closed"
        return f"<Journal goal={self.goal!r} {state} path={str(self.path)!r}>"

    # -- the run's result (used by @durable) -----------------------------------

    def set_result(self, value: Any) -> None:
        """Record ``value`` as the run's result when the run completes (``runs.result``).

        ``@durable`` records its function's return value this way. Raises
        EncodeError at once (nothing written) for a value the codec cannot encode.
        """
        try:
            self._result_text = codec.encode(value, self.registry)
        except EncodeError as exc:
            raise EncodeError(
                f"run {self.run_id} of goal {self.goal!r}: result: {exc}", path=exc.path
            ) from None

    def recorded_result(self) -> Any:
        """The result recorded when the run completed (None if it recorded none).

        Meaningful when :attr:`was_completed`: ``@durable`` returns it for a
        completed named run without running its body.
        """
        if self._recorded_result is None:
            return None
        try:
            return codec.decode(self._recorded_result, self.registry)
        except DecodeError as exc:
            raise DecodeError(f"run {self.run_id} of goal {self.goal!r}: result: {exc}") from None

    # -- steps ---------------------------------------------------------------

    def _owner(self) -> object:
        """Who is calling: the running asyncio task, else the thread.

        Concurrent calls of one step name from two owners are refused; a task
        is its own owner, so steps gathered on one event loop thread are told
        apart (see :meth:`_claim`).
        """
        # asyncio is imported only by programs that use it (it is slow to import):
        # if it is not loaded, no event loop can be running.
        aio = sys.modules.get("asyncio")
        if aio is not None and aio._get_running_loop() is not None:
            task = aio.current_task()
            if task is not None:
                return task
        return threading.get_ident()

    def _key_for(
        self, name: str, fp: str, owner: object
    ) -> tuple[str, str, Recorded | None, Recorded | None]:
        """``(full name, key, replay, mismatch)`` of a call of step ``name`` (see letitloop.keys).

        The name is checked before anything else happens, so a call with an
        unusable name never runs its function.
        """
        # The common case in one cheap test; check_name explains anything else.
        if not (
            type(name) is str
            and 0 < len(name) <= MAX_NAME_LENGTH
            and name.isprintable()
            and not name.isspace()
        ):
            check_name("step", name)
        if "#" in name and REPEAT_SUFFIX.search(name):
            raise InvalidNameError(
                f"step name {name!r} ends in '#<number>', which letitloop uses to number "
                f"repeated calls of one name ('fetch', 'fetch#2', …); rename the step"
            )
        parent = _parent_step.get()
        if parent is not None and parent[0] is self:
            name = f"{parent[1]}{NEST}{name}"
        key, replay, mismatch = self._keys.claim(name, fp, owner)
        return name, key, replay, mismatch

    def _require_open(self) -> Store:
        store = self.store
        if store is None:
            raise LetItLoopError(
                f"journal of goal {self.goal!r} is not open; use it as "
                f"'with Journal({self.goal!r}) as j:' or call j.open() first"
            )
        return store

    def step(self, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Return ``fn(*args, **kwargs)``, recorded once for this run and replayed ever after.

        On replay the recorded result comes back without calling ``fn``: the
        result recorded for this very call (same name, same function, same
        arguments; see letitloop.keys). A fresh result is committed to the
        journal file before this returns. If ``fn`` raises, the failure is
        recorded (for inspection) and re-raised; the step runs again on the
        next attempt. A step called inside ``fn`` is keyed under this one
        (``name/inner``). Raises StepMismatchError when the key was recorded
        by another function or for other arguments, EncodeError (nothing
        written) when the result cannot be encoded, ConcurrentStepError when
        another thread is running a step of the same name.

        ``retry=RetryPolicy(...)`` among the keyword arguments is taken by the
        journal, not passed to ``fn`` (any other ``retry=`` value is passed on):
        ``fn`` is tried again as the policy says, each failed try recorded
        (letitloop/retry.py); the journal's own ``retry`` applies otherwise.
        Raises RunCancelledError, before anything runs, once the run was cancelled.
        """
        store = self._require_open()
        if self._cancel is not None:
            raise cancellation.error(self)
        policy = self.retry
        if kwargs and "retry" in kwargs and isinstance(kwargs["retry"], RetryPolicy):
            policy = kwargs.pop("retry")
        owner = self._owner()
        fp = self._fingerprints.call(args, kwargs)
        full, key, replay, mismatch = self._key_for(name, fp, owner)
        fn_name = function_name(fn)
        if mismatch is not None:
            raise self._mismatch(key, fn_name, fp, mismatch)
        if replay is not None:
            replayed: T = self._replay(key, fn_name, replay)
            return replayed
        try:
            if UNCHECKED in fp:
                args, kwargs = unwrap(args, kwargs)
            started = self.clock()
            self._in_flight[key] = (started, fn_name, fp)
            if self._flight_watch is None:
                self._watch_flight(store)
            parent = _parent_step.set((self, key))
            try:
                if policy is None:
                    value = fn(*args, **kwargs)
                else:
                    value = retries.call(self, store, key, fn_name, fp, policy, fn, args, kwargs)
            except Exception as exc:
                self._record_failure(store, key, fn_name, fp, started, exc)
                raise
            finally:
                _parent_step.reset(parent)
            self._record_done(store, key, fn_name, fp, started, value)
            return value
        finally:
            self._in_flight.pop(key, None)
            self._keys.release(full, owner)

    @overload
    async def async_step(
        self, name: str, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T: ...

    @overload
    async def async_step(
        self, name: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> T: ...

    async def async_step(
        self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Any:
        """Await ``fn(*args, **kwargs)``, recorded once for this run and replayed ever after.

        ``fn`` may be a coroutine function (awaited on this loop) or a plain
        function (run in a worker thread with ``asyncio.to_thread``, so the loop
        is not blocked). Keys, replay, mismatch detection and failure records are
        those of :meth:`step`; the result is committed before this returns: at
        once on the loop, or with the other steps that finished in the same loop
        pass, or in a worker thread when the commit would wait (see
        ``letitloop/commits.py``). A step cancelled while ``fn`` runs
        (``asyncio.CancelledError``: a timeout, a failed task group) is not
        recorded and runs again on the next attempt; the cancellation propagates.
        A cancellation that arrives after ``fn`` returned, while its result waits
        to be committed, does not stop that commit: the step is recorded and replays.
        Raises ConcurrentStepError when another task uses ``name`` in this
        attempt (see :meth:`_claim`). ``retry=`` is taken as for :meth:`step`.
        Once the run is cancelled this raises RunCancelledError, also from inside
        the await of a step in flight (its task is cancelled; see cancellation.py).
        """
        store = self._require_open()
        if self._cancel is not None:
            raise cancellation.error(self)
        policy = self.retry
        if kwargs and "retry" in kwargs and isinstance(kwargs["retry"], RetryPolicy):
            policy = kwargs.pop("retry")
        owner = self._owner()
        fp = self._fingerprints.call(args, kwargs)
        full, key, replay, mismatch = self._key_for(name, fp, owner)
        fn_name = function_name(fn)
        if mismatch is not None:
            raise self._mismatch(key, fn_name, fp, mismatch)
        if replay is not None:
            return self._replay(key, fn_name, replay)
        try:
            if UNCHECKED in fp:
                args, kwargs = unwrap(args, kwargs)
            started = self.clock()
            self._in_flight[key] = (started, fn_name, fp)
            if self._flight_watch is None:
                self._watch_flight(store)
            parent = _parent_step.set((self, key))
            if type(owner) is not int:
                self._aio_tasks[owner] = key  # a cancel of the run interrupts its await
            try:
                import inspect  # loaded by programs that use async steps only

                if policy is not None:
                    value = await retries.async_call(
                        self, store, key, fn_name, fp, policy, partial(_call, fn, args, kwargs)
                    )
                elif inspect.iscoroutinefunction(fn):
                    value = await fn(*args, **kwargs)
                else:
                    value = await _call(fn, args, kwargs)
            except Exception as exc:
                if self.store is store:
                    # The step's own exception matters more than its failed record.
                    with contextlib.suppress(LetItLoopError):
                        failed = self._commit_from_loop(
                            store, self._failure_row(key, fn_name, fp, started, exc)
                        )
                        if failed is not None:
                            await failed
                raise
            except BaseException as exc:
                stopped = cancellation.converted(self, exc)
                if stopped is not None:
                    raise stopped from None
                raise
            finally:
                _parent_step.reset(parent)
                self._aio_tasks.pop(owner, None)
            committing = self._commit_from_loop(
                store, self._done_row(store, key, fn_name, fp, started, value)
            )
            if committing is not None:
                await committing
            return value
        finally:
            self._in_flight.pop(key, None)
            self._keys.release(full, owner)

    # -- sleeps and waits (letitloop/sleeps.py, letitloop/waits.py) -------------

    def sleep(self, name: str, seconds: float) -> None:
        """Sleep ``seconds``, durably: a restart sleeps only what remains; a done sleep replays.

        The sleep is a row keyed and numbered like a step (``name``, ``name#2``),
        written with its wake-up time when it starts; the wake-up time recorded
        first is kept, whatever ``seconds`` a later attempt passes. Raises
        RunCancelledError as soon as the run is cancelled.
        """
        sleeps.sleep(self, name, seconds)

    async def async_sleep(self, name: str, seconds: float) -> None:
        """:meth:`sleep` for async code: the event loop runs meanwhile."""
        await sleeps.async_sleep(self, name, seconds)

    def wait_for(
        self, name: str, *, timeout: float | None = None, stop_after: float | None = None
    ) -> Any:
        """The value sent for ``name`` from outside (``lil send``, ``letitloop.send``).

        The value is recorded like a step's result: a resumed run gets the same
        value back without waiting. ``timeout``: seconds from the wait's first
        start after which WaitTimeoutError is raised (and recorded: a replay
        raises it again). ``stop_after``: seconds this process waits before it
        stops with RunWaiting (exit status 75), leaving the run ``waiting``;
        running the program again after a value was sent resumes the run.
        Raises RunCancelledError as soon as the run is cancelled.
        """
        return waits.wait_for(self, name, timeout, stop_after)

    async def async_wait_for(
        self, name: str, *, timeout: float | None = None, stop_after: float | None = None
    ) -> Any:
        """:meth:`wait_for` for async code: the event loop runs meanwhile."""
        return await waits.async_wait_for(self, name, timeout, stop_after)

    def _watch_flight(self, store: Store) -> None:
        """Have the process's watcher make this journal's long steps visible (inflight.py)."""
        with self._keys_lock:
            if self.store is not store or self._flight_watch is not None:
                return
            watched = inflight.Watched(
                store, self.table, self.run_id, self.attempt, self._in_flight, self.clock
            )
            watched.poll = partial(cancellation.poll, self)  # a cancel is noticed between steps
            self._flight_watch = watched
        inflight.WATCH.watch(watched)

    def _record_done(
        self, store: Store, key: str, fn_name: str, fp: str, started: float, value: Any
    ) -> None:
        """Encode ``value`` and commit it as step ``key``'s result (one small transaction)."""
        store.write1(self._upsert_sql, self._done_row(store, key, fn_name, fp, started, value))

    def _done_row(
        self, store: Store, key: str, fn_name: str, fp: str, started: float, value: Any
    ) -> tuple[Any, ...]:
        """The journal row of a step that returned ``value``; raises before anything is written."""
        try:
            text = codec.encode(value, self.registry)
        except EncodeError as exc:
            raise EncodeError(
                f"step {key!r} (run {self.run_id}): {exc}; nothing was recorded",
                path=exc.path,
                key=key,
            ) from None
        if len(text) > store.max_text // 4 and len(text.encode("utf-8")) > store.max_text:
            raise EncodeError(
                f"step {key!r} (run {self.run_id}): the encoded result is "
                f"{len(text.encode('utf-8')):,} bytes, over the {store.max_text:,} bytes "
                f"SQLite stores in one value; nothing was recorded. Store large data in a "
                f"file and return its path",
                path="$",
                key=key,
            )
        if self.store is not store:
            raise LetItLoopError(
                f"step {key!r} (run {self.run_id} of goal {self.goal!r}) returned after its "
                f"journal was closed, so its result was not recorded and it runs again next "
                f"attempt; await every step before leaving the journal's 'with' block"
            )
        finished = self.clock()
        spent = self._usage.pop(key, None) if self._usage else None
        return (
            self.run_id,
            key,
            "done",
            fn_name,
            text,
            utc_iso(started),
            utc_iso(finished),
            (finished - started) * 1000.0,
            self.attempt,
            None,
            None,
            fp,
            *(NO_USAGE if spent is None else spent.columns()),
        )

    def _commit_from_loop(self, store: Store, row: tuple[Any, ...]) -> asyncio.Future[None] | None:
        """Commit one step row from the loop, at once (None) or in a group commit (a future).

        See ``letitloop/commits.py``. The future resolves once the row is
        committed; a done row enters the replay map then, even if the awaiting
        task was cancelled meanwhile.
        """
        commits = self._loop_commits_for(store)
        if commits.closed:
            raise LetItLoopError(
                f"step {row[1]!r} (run {self.run_id} of goal {self.goal!r}) returned while its "
                f"journal was closing, so its result was not recorded and it runs again next "
                f"attempt; await every step before leaving the journal's 'with' block"
            )
        return commits.commit(row)

    def _loop_commits_for(self, store: Store) -> LoopCommits:
        """The group commit of the running loop for ``store`` (made on first use)."""
        commits = self._loop_commits
        if commits is None or commits.store is not store or not commits.on_this_loop():
            from .commits import LoopCommits

            commits = self._loop_commits = LoopCommits(
                store,
                self._upsert_sql,
                inline=self.durability == "process",
                on_committed=self._committed,
            )
        return commits

    def _committed(self, row: Sequence[Any]) -> None:
        """A row committed by the group commit (its key was claimed when its step began)."""

    def atomic_marker(
        self, name: str, *, scope: Scope = "run", timeout: float | None = None
    ) -> AtomicMarker:
        """Guard a side effect once: ``with j.atomic_marker(name) as should_execute:``.

        Yields a truthy offer to one holder at a time until a block exits
        cleanly, then false to every later entry (see letitloop.markers).
        ``scope`` is ``"run"`` (default), ``"goal"`` or ``"global"``; a waiter
        gives up after ``timeout`` seconds (default: the journal's timeout)
        with MarkerHeldError naming the holder.
        """
        if self._cancel is not None:
            raise cancellation.error(self)
        marker = AtomicMarker(
            self, name, scope=scope, timeout=self.timeout if timeout is None else timeout
        )
        if scope == "run":
            keys = self._keys
            with keys.lock:
                if keys.used(name):
                    raise InvalidNameError(
                        f"marker {name!r} (run {self.run_id}): the name is already the key of "
                        f"a step of this run; steps and run-scoped markers of a run share one "
                        f"set of keys; rename the marker (e.g. {name + ':sent'!r}) or the step"
                    )
                keys.marker_keys.add(name)
        return marker

    def _replay(self, key: str, fn_name: str, recorded: Recorded) -> Any:
        if recorded.fn != fn_name:
            raise StepMismatchError(
                f"step {key!r} (run {self.run_id} of goal {self.goal!r}): recorded by "
                f"{recorded.fn}, now called with {fn_name} — the code changed under a "
                f"recorded run; {self._ways_out(key)}",
                run_id=self.run_id,
                key=key,
                recorded=recorded.fn,
                called=fn_name,
            )
        assert self._results is not None
        text = self._results.get(recorded.rowid)
        if text is None:
            return None
        try:
            return codec.decode(text, self.registry)
        except DecodeError as exc:
            raise DecodeError(f"step {key!r} (run {self.run_id}): {exc}") from None

    def _ways_out(self, key: str) -> str:
        # Shell-quoted, so each command works as pasted whatever the goal and key hold.
        import shlex  # only for an error's advice

        reset = f"lil reset {shlex.quote(self.goal)} --run {self.run_id}"
        fork = f"lil fork {self.run_id} --from-step {shlex.quote(key)}"
        return f"reset it with: {reset}; or fork it with: {fork}"

    def _mismatch(self, key: str, fn_name: str, fp: str, recorded: Recorded) -> StepMismatchError:
        """The error of a call whose arguments differ from those recorded at its position."""
        name, _ = split_key(key)
        what = differences(recorded.fp or "", fp)
        code = (
            f" (and it was recorded by {recorded.fn}, now called with {fn_name})"
            if recorded.fn != fn_name
            else ""
        )
        return StepMismatchError(
            f"step {key!r} (run {self.run_id} of goal {self.goal!r}) was recorded for other "
            f"arguments than this call of {name!r} passes: {what}{code}; this attempt has not "
            f"made the recorded call, and a result recorded for other arguments is never "
            f"handed back. If an argument legitimately changes between attempts (a timestamp "
            f"or id made outside any step), pass it as letitloop.unchecked(value) or make it "
            f"inside a step; if calls of {name!r} come from several threads or tasks, give "
            f"each its own name (f'{name}:{{item}}'); otherwise the code or its inputs changed "
            f"under a recorded run: {self._ways_out(key)}",
            run_id=self.run_id,
            key=key,
            recorded=recorded.fn,
            called=fn_name,
            differences=what,
        )

    def _record_failure(
        self,
        store: Store,
        key: str,
        fn_name: str,
        fp: str,
        started: float,
        exc: BaseException,
    ) -> None:
        if self.store is not store:
            return  # the journal was closed while the step ran: nothing to write to
        # The step's own exception matters more than its failed record.
        with contextlib.suppress(LetItLoopError):
            store.write1(self._upsert_sql, self._failure_row(key, fn_name, fp, started, exc))

    def _failure_row(
        self, key: str, fn_name: str, fp: str, started: float, exc: BaseException
    ) -> tuple[Any, ...]:
        finished = self.clock()
        spent = self._usage.pop(key, None) if self._usage else None
        return (
            self.run_id,
            key,
            "failed",
            fn_name,
            None,
            utc_iso(started),
            utc_iso(finished),
            (finished - started) * 1000.0,
            self.attempt,
            error_text(exc),
            traceback_text(exc),
            fp,
            *(NO_USAGE if spent is None else spent.columns()),
        )


async def _call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """One call of an async step's function: awaited, or run in a worker thread."""
    import inspect  # loaded by programs that use async steps only

    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    import asyncio

    value = await asyncio.to_thread(fn, *args, **kwargs)
    if inspect.isawaitable(value):  # a plain function that returned a coroutine
        value = await value
    return value


def open_journals() -> list[Journal]:
    """The journals open in this process, oldest first."""
    with _registry_lock:
        return list(_open_journals)
