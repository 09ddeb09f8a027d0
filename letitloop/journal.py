"""``Journal``: runs, steps, replay and step keys.

A journal is one goal's open run in one process. Opening it resumes the
goal's newest unfinished run (or the named run), holds it against other
processes, and loads the run's recorded steps so that replay is a dict
lookup. ``step()`` replays a recorded result without calling the function,
or calls it and commits its result before returning it.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import secrets
import socket
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from functools import partial
from pathlib import Path
from types import FunctionType, TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

import filelock

from . import codec
from .errors import (
    ConcurrentStepError,
    DecodeError,
    EncodeError,
    InvalidNameError,
    JournalFileError,
    LetItLoopError,
    RunHeldError,
    StepMismatchError,
)
from .markers import AtomicMarker, Scope
from .store import MAX_NAME_LENGTH, Durability, Store, check_name, utc_iso

if TYPE_CHECKING:
    import asyncio

    from .commits import LoopCommits

T = TypeVar("T")

#: Default seconds a journal waits for a run held by another live process.
DEFAULT_TIMEOUT = 10.0

#: The innermost open journal of the current context (thread or task); what the
#: free functions step() and atomic_marker() use.
current_journal: ContextVar[Journal | None] = ContextVar("letitloop_journal", default=None)

# Runs held by journals of this process: (journal file, run id). A second
# journal on the same run in this process is refused at once instead of
# deadlocking on its own lock file.
_held: set[tuple[str, str]] = set()
_open_journals: list[Journal] = []
_registry_lock = threading.Lock()

_REPEAT_SUFFIX = re.compile(r"#\d+$")
# Before 3.12, asyncio.wait_for runs its awaitable in a task of its own.
_WAIT_FOR_HINT = (
    " (on this Python, asyncio.wait_for runs the step in a new task: put the timeout "
    "inside the step's function instead)"
    if sys.version_info < (3, 12)
    else ""
)
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_HOST = socket.gethostname()


def new_run_id(t: float) -> str:
    """A ULID: 48-bit milliseconds then 80 random bits, Crockford base32; sorts by time."""
    n = (int(t * 1000) << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(n >> shift) & 31] for shift in range(125, -1, -5))


def run_lock_path(store: Store, run_id: str) -> Path:
    """The lock file a process holds while it has ``run_id`` open (see ``lil reset``)."""
    return store.lock_file("run", f"{store.path.resolve()}\0{run_id}")


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


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__qualname__}: {exc}"


_UPSERT_STEP = (
    'INSERT INTO "{table}" (run, key, kind, status, fn, result, started_at, finished_at, '
    "duration_ms, attempt, error, traceback) VALUES (?, ?, 'step', ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET status = excluded.status, fn = excluded.fn, "
    "result = excluded.result, started_at = excluded.started_at, "
    "finished_at = excluded.finished_at, duration_ms = excluded.duration_ms, "
    "attempt = excluded.attempt, error = excluded.error, traceback = excluded.traceback"
)


class Journal:
    """One goal's run, held by this process while open.

    ``Journal(goal)`` resumes the goal's newest run that has not completed
    (crashed or failed), or starts a new one. ``Journal(goal, run="key")``
    names the run: the same key always means the same run, and a completed
    run replays every step. Use it as a context manager: a clean exit marks
    the run completed, an exception marks it failed with its error (the next
    open resumes it from the failed step).

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
    ) -> None:
        self.goal = check_name("goal", goal)
        self.run_name = None if run is None else check_name("run", run)
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
        self._done: dict[str, tuple[str | None, str | None]] = {}
        self._counts: dict[str, int] = {}
        self._in_flight: dict[str, list[object]] = {}
        #: Names of this run's run-scoped markers: a step may not take one as its key.
        self._marker_keys: set[str] = set()
        # Step name -> the asyncio task that first claimed it in this attempt.
        self._task_names: dict[str, weakref.ref[Any]] = {}
        # The group commit of async steps, bound to the loop that made it.
        self._loop_commits: LoopCommits | None = None
        self._keys_lock = threading.Lock()
        self._lock: filelock.BaseFileLock | None = None
        self._held_key: tuple[str, str] | None = None
        self._tokens: list[Any] = []
        self._upsert_sql = ""  # the step-row statement for self.table, set on open

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
        store = Store(self._path_arg, durability=self.durability)
        try:
            self._open_run(store)
        except BaseException:
            self._release()
            store.close()
            raise
        self.store = store
        with _registry_lock:
            _open_journals.append(self)
        return self

    def _open_run(self, store: Store) -> None:
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
                    row = c.execute(
                        "SELECT id FROM runs WHERE goal = ? AND status IN ('running', 'failed') "
                        "ORDER BY id DESC LIMIT 1",
                        (self.goal,),
                    ).fetchone()
                if row:
                    run_id = str(row[0])
                else:
                    run_id = new_run_id(now)
                    c.execute(
                        "INSERT INTO runs (id, goal, name, status, attempts, started_at, "
                        "updated_at) VALUES (?, ?, ?, 'running', 0, ?, ?)",
                        (run_id, self.goal, self.run_name, utc_iso(now), utc_iso(now)),
                    )
            self._hold(store, run_id)
            now = self.clock()
            with store.write() as c:
                found = c.execute(
                    "SELECT status, attempts, result, name FROM runs WHERE id = ?", (run_id,)
                ).fetchone()
                # Forgotten ('lil reset', 'lil gc') or its name handed to a fork ('lil fork')
                # while we waited for its holder: look again.
                status, attempts, result, name = found or ("completed", 0, None, None)
                if (
                    found is None
                    or (name != self.run_name and self.run_name is not None)
                    or (status == "completed" and self.run_name is None)
                ):
                    # It completed while we waited for its holder: start a new run.
                    retry = True
                else:
                    retry = False
                    self.was_completed = status == "completed"
                    self._recorded_result = result
                    if not self.was_completed:
                        attempts += 1
                        c.execute(
                            "UPDATE runs SET status = 'running', attempts = ?, holder_pid = ?, "
                            "holder_host = ?, updated_at = ? WHERE id = ?",
                            (attempts, os.getpid(), _HOST, utc_iso(now), run_id),
                        )
                        c.execute(
                            "INSERT OR REPLACE INTO attempts (run, attempt, pid, host, watch_id, "
                            "started_at) VALUES (?, ?, ?, ?, ?, ?)",
                            (
                                run_id,
                                attempts,
                                os.getpid(),
                                _HOST,
                                os.environ.get("LETITLOOP_WATCH_ID"),
                                utc_iso(now),
                            ),
                        )
            if retry:
                self._release()
                continue
            self.run_id = run_id
            self.attempt = max(attempts, 1)
            self._load_steps(store)
            return

    def _hold(self, store: Store, run_id: str) -> None:
        key = (str(store.path.resolve()), run_id)
        with _registry_lock:
            if key in _held:
                raise RunHeldError(
                    f"run {run_id} of goal {self.goal!r} is already open in this process "
                    f"(pid {os.getpid()}); close the other Journal first, or name a "
                    f"different run",
                    run_id=run_id,
                    pid=os.getpid(),
                    host=_HOST,
                )
            _held.add(key)
        self._held_key = key
        # thread_local=False: an `async with` journal takes the lock in a worker
        # thread and releases it on the event loop's thread.
        lock = filelock.FileLock(run_lock_path(store, run_id), thread_local=False)
        try:
            lock.acquire(timeout=self.timeout)
        except filelock.Timeout:
            rows = store.query(
                "SELECT holder_pid, holder_host, updated_at FROM runs WHERE id = ?", (run_id,)
            )
            pid, host, since = rows[0] if rows else (None, None, None)
            raise RunHeldError(
                f"run {run_id} of goal {self.goal!r} is held by process {pid} on {host} "
                f"(since {since}); waited {self.timeout:g} s. Wait for it to finish, stop it, "
                f"or pass a longer timeout=",
                run_id=run_id,
                pid=pid,
                host=host,
            ) from None
        self._lock = lock

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self._held_key is not None:
            with _registry_lock:
                _held.discard(self._held_key)
            self._held_key = None

    def _load_steps(self, store: Store) -> None:
        rows = store.query(
            f"SELECT key, fn, result FROM \"{self.table}\" WHERE run = ? AND kind = 'step' "
            f"AND status = 'done'",
            (self.run_id,),
        )
        self._done = {key: (fn, result) for key, fn, result in rows}
        markers = store.query(
            f"SELECT key FROM \"{self.table}\" WHERE run = ? AND kind = 'marker'", (self.run_id,)
        )
        self._marker_keys = {key for (key,) in markers}

    def close(self, exc: BaseException | None = None) -> None:
        """Mark the run completed (``exc`` is None) or failed with ``exc``, and release it."""
        store = self.store
        if store is None:
            return
        try:
            if not self.was_completed:
                now = utc_iso(self.clock())
                if exc is None:
                    store.write1(
                        "UPDATE runs SET status = 'completed', finished_at = ?, updated_at = ?, "
                        "result = ?, error = NULL WHERE id = ?",
                        (now, now, self._result_text, self.run_id),
                    )
                else:
                    store.write1(
                        "UPDATE runs SET status = 'failed', updated_at = ?, error = ? WHERE id = ?",
                        (now, _error_text(exc), self.run_id),
                    )
        finally:
            self._release()
            store.close()
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
        """Record ``value`` as the run's result when the run completes."""
        try:
            self._result_text = codec.encode(value, self.registry)
        except EncodeError as exc:
            raise EncodeError(
                f"run {self.run_id} of goal {self.goal!r}: result: {exc}", path=exc.path
            ) from None

    def recorded_result(self) -> Any:
        """The result recorded when the run completed (None if it recorded none)."""
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

    def _claim(
        self, name: str, owner: object = None
    ) -> tuple[str, tuple[str | None, str | None] | None]:
        """Reserve the key of the next call of ``name`` by ``owner``: ``(key, recorded)``.

        ``recorded`` is the key's recorded ``(fn, result)`` when it replays; a
        replay is over at once, so only a call that runs (``recorded`` is None)
        is marked in flight, and must be released with :meth:`_unclaim`.

        Keys number repeats in call order (``name``, ``name#2``). Call order is
        only defined inside one owner, so: a name in flight in another thread or
        task is refused, and a name claimed by an asyncio task belongs to that
        task for the rest of this attempt (another task using it is refused even
        after the first finished, since which of two tasks comes first is timing).
        """
        # The common case in one cheap test; check_name explains anything else.
        if not (
            type(name) is str
            and 0 < len(name) <= MAX_NAME_LENGTH
            and name.isprintable()
            and not name.isspace()
        ):
            check_name("step", name)
        if "#" in name and _REPEAT_SUFFIX.search(name):
            raise InvalidNameError(
                f"step name {name!r} ends in '#<number>', which letitloop uses to number "
                f"repeated calls of one name ('fetch', 'fetch#2', …); rename the step"
            )
        if owner is None:
            owner = self._owner()
        with self._keys_lock:
            owners = self._in_flight.get(name)
            if owners and any(o != owner for o in owners):
                raise ConcurrentStepError(
                    f"step {name!r} (run {self.run_id}) was called again while another call "
                    f"of the same name was still running in another thread or task; their "
                    f"keys could not be ordered. Give concurrent steps distinct names, e.g. "
                    f"f'{name}:{{item}}'",
                    run_id=self.run_id,
                    name=name,
                )
            if self._task_names:
                first = self._task_names.get(name)
                if first is not None and first() is not owner:
                    raise ConcurrentStepError(
                        f"step {name!r} (run {self.run_id}) was already used by another asyncio "
                        f"task in this attempt; which of two tasks numbers its call first "
                        f"depends on timing, so their keys could not be ordered. Give each "
                        f"task's steps distinct names, e.g. f'{name}:{{item}}'{_WAIT_FOR_HINT}",
                        run_id=self.run_id,
                        name=name,
                    )
            n = self._counts.get(name, 0) + 1
            key = name if n == 1 else f"{name}#{n}"
            if key in self._marker_keys:
                raise InvalidNameError(
                    f"step {key!r} (run {self.run_id}): the key is already the name of a "
                    f"marker of this run; steps and run-scoped markers of a run share one "
                    f"set of keys; rename the step or the marker"
                )
            if type(owner) is not int and name not in self._task_names:
                self._task_names[name] = weakref.ref(owner)
            self._counts[name] = n
            recorded = self._done.get(key)
            if recorded is None:
                if owners is None:
                    self._in_flight[name] = [owner]
                else:
                    owners.append(owner)
        return key, recorded

    def _unclaim(self, name: str, owner: object = None) -> None:
        if owner is None:
            owner = self._owner()
        with self._keys_lock:
            owners = self._in_flight[name]
            owners.remove(owner)
            if not owners:
                del self._in_flight[name]

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

        On replay the recorded result comes back without calling ``fn``. A fresh
        result is committed to the journal file before this returns. If ``fn``
        raises, the failure is recorded (for inspection) and re-raised; the step
        runs again on the next attempt. Raises StepMismatchError when the key was
        recorded by another function, EncodeError (nothing written) when the
        result cannot be encoded, ConcurrentStepError when another thread is
        running a step of the same name.
        """
        store = self._require_open()
        owner = self._owner()
        key, recorded = self._claim(name, owner)
        fn_name = function_name(fn)
        if recorded is not None:
            replayed: T = self._replay(key, fn_name, recorded)
            return replayed
        try:
            started = self.clock()
            try:
                value = fn(*args, **kwargs)
            except Exception as exc:
                self._record_failure(store, key, fn_name, started, exc)
                raise
            self._record_done(store, key, fn_name, started, value)
            return value
        finally:
            self._unclaim(name, owner)

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
        attempt (see :meth:`_claim`).
        """
        store = self._require_open()
        owner = self._owner()
        key, recorded = self._claim(name, owner)
        fn_name = function_name(fn)
        if recorded is not None:
            return self._replay(key, fn_name, recorded)
        try:
            started = self.clock()
            try:
                if inspect.iscoroutinefunction(fn):
                    value = await fn(*args, **kwargs)
                else:
                    import asyncio

                    value = await asyncio.to_thread(fn, *args, **kwargs)
                    if inspect.isawaitable(value):  # a plain function that returned a coroutine
                        value = await value
            except Exception as exc:
                if self.store is store:
                    # The step's own exception matters more than its failed record.
                    with contextlib.suppress(LetItLoopError):
                        failed = self._commit_from_loop(
                            store, self._failure_row(key, fn_name, started, exc)
                        )
                        if failed is not None:
                            await failed
                raise
            committing = self._commit_from_loop(
                store, self._done_row(store, key, fn_name, started, value)
            )
            if committing is not None:
                await committing
            return value
        finally:
            self._unclaim(name, owner)

    def _record_done(
        self, store: Store, key: str, fn_name: str, started: float, value: Any
    ) -> None:
        """Encode ``value`` and commit it as step ``key``'s result (one small transaction)."""
        row = self._done_row(store, key, fn_name, started, value)
        store.write1(self._upsert_sql, row)
        self._done[key] = (fn_name, row[4])

    def _done_row(
        self, store: Store, key: str, fn_name: str, started: float, value: Any
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
        if self.store is not store:
            raise LetItLoopError(
                f"step {key!r} (run {self.run_id} of goal {self.goal!r}) returned after its "
                f"journal was closed, so its result was not recorded and it runs again next "
                f"attempt; await every step before leaving the journal's 'with' block"
            )
        finished = self.clock()
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
        if row[2] == "done":
            self._done[row[1]] = (row[3], row[4])

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
        marker = AtomicMarker(
            self, name, scope=scope, timeout=self.timeout if timeout is None else timeout
        )
        if scope == "run":
            with self._keys_lock:
                base, _, number = name.rpartition("#")
                n = int(number) if base and number.isdigit() else 1
                # Step keys are 'name' (first call) and 'name#2', 'name#3', …
                counted = self._counts.get(base, 0) >= n if n >= 2 else name in self._counts
                if counted or name in self._done:
                    raise InvalidNameError(
                        f"marker {name!r} (run {self.run_id}): the name is already the key of "
                        f"a step of this run; steps and run-scoped markers of a run share one "
                        f"set of keys; rename the marker (e.g. {name + ':sent'!r}) or the step"
                    )
                self._marker_keys.add(name)
        return marker

    def _replay(self, key: str, fn_name: str, recorded: tuple[str | None, str | None]) -> Any:
        recorded_fn, text = recorded
        if recorded_fn != fn_name:
            raise StepMismatchError(
                f"step {key!r} (run {self.run_id} of goal {self.goal!r}): recorded by "
                f"{recorded_fn}, now called with {fn_name} — the code changed under a "
                f"recorded run; reset it with 'lil reset {self.goal} --run {self.run_id}' "
                f"or fork it with 'lil fork {self.run_id} --from-step {key}'",
                run_id=self.run_id,
                key=key,
                recorded=recorded_fn,
                called=fn_name,
            )
        if text is None:
            return None
        try:
            return codec.decode(text, self.registry)
        except DecodeError as exc:
            raise DecodeError(f"step {key!r} (run {self.run_id}): {exc}") from None

    def _record_failure(
        self, store: Store, key: str, fn_name: str, started: float, exc: BaseException
    ) -> None:
        if self.store is not store:
            return  # the journal was closed while the step ran: nothing to write to
        # The step's own exception matters more than its failed record.
        with contextlib.suppress(LetItLoopError):
            store.write1(self._upsert_sql, self._failure_row(key, fn_name, started, exc))

    def _failure_row(
        self, key: str, fn_name: str, started: float, exc: BaseException
    ) -> tuple[Any, ...]:
        finished = self.clock()
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
            _error_text(exc),
            "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        )


def open_journals() -> list[Journal]:
    """The journals open in this process, oldest first."""
    with _registry_lock:
        return list(_open_journals)
