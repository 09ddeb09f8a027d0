"""Work queues: ``Queue``, its registered tasks, ``enqueue`` and the ``Handle`` of a queued run.

``Queue("emails", concurrency=4, rate_limit=(100, "1m"))`` on a journal (a
file; ``path=`` as ``Journal``'s) keeps its entries in that journal
(``sqlite_queue.py``, migration 0021). A function runs on a queue once it is
registered by a name of its own (``@queue.task`` or ``@queue.task(name=…)``):
the name, never the function's module path, is what an entry records, so
moving code changes no file. ``queue.enqueue(send, "a@b.c")`` adds an entry
and returns its :class:`Handle`; workers (``queue_worker.py``, ``lil
worker``) claim entries and run each as an ordinary run of the goal named
by the task, in the same journal: its steps are journaled and replay, ``lil
runs`` and ``lil show`` show it. docs/queues.md says what the limits promise.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Generator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from .. import codec
from ..errors import EncodeError, QueueError, RunCancelledError
from ..identity.names import check_name
from ..primitives import forksafe
from ..primitives.clock import utc_iso
from ..stores.schemes import malformed_url, scheme_of
from ..stores.sqlite.queue import SqliteQueue
from . import children
from .queue_records import ENDED, EntryState, Limits

if TYPE_CHECKING:
    from ..stores.postgres.queue import PostgresQueue
    from ..stores.sqlite.pragmas import Durability
    from .queue_worker import Worker

F = TypeVar("F", bound=Callable[..., Any])

#: The queues this process declared, by name: ``lil worker MODULE --queue NAME`` finds
#: its queue here once MODULE is imported.
_declared: dict[str, Queue] = {}
_declared_lock = forksafe.lock()

#: A rate limit's window as text: a number and its unit.
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

#: What a handle's status says of an entry's row status.
_SAID = {"claimed": "running"}


def declared(name: str) -> Queue | None:
    """The queue this process declared under ``name`` (the last one), or None."""
    with _declared_lock:
        return _declared.get(name)


def declared_names() -> list[str]:
    """The names of the queues this process declared."""
    with _declared_lock:
        return sorted(_declared)


class Queue:
    """A named work queue on a journal: its limits, its tasks, and entries added to it.

    ``concurrency``: at most this many of its runs at once, across every worker
    of every process on the journal (None: no limit). ``rate_limit=(n, window)``:
    at most ``n`` claims in any ``window`` (seconds, a ``timedelta``, or text
    such as ``"1m"``, ``"30s"``, ``"1h"``), a taken-over run included. Each
    worker enforces the limits its own ``Queue`` declares: declare them alike
    in every program. ``path``, ``durability``, ``registry`` and ``timeout``
    are ``Journal``'s, for the queue's entries and its runs. ``lease`` (on
    PostgreSQL): seconds after which an entry whose worker stopped renewing it
    (a host that vanished) is taken over; workers renew every ``lease / 3``.
    ``listen`` (on PostgreSQL): entries added send NOTIFY and idle workers
    LISTEN, so they start at once instead of at their next look; False for a
    server reached through a pooler that does not pass notifications on.
    """

    def __init__(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        rate_limit: tuple[int, float | str | timedelta] | None = None,
        path: str | os.PathLike[str] | None = None,
        durability: Durability = "process",
        registry: codec.CodecRegistry | None = None,
        timeout: float = 60.0,
        lease: float = 10.0,
        listen: bool = True,
    ) -> None:
        self.name = check_name("queue", name)
        if concurrency is not None and (type(concurrency) is not int or concurrency < 1):
            raise QueueError(
                f"Queue({name!r}): concurrency must be a whole number of runs, 1 or more, or "
                f"None for no limit; got {concurrency!r}"
            )
        self.limits = Limits(concurrency, _rate(name, rate_limit))
        self.path = path
        self.durability: Durability = durability
        self.registry = registry
        self.timeout = timeout
        #: Registered tasks: name -> function, and back.
        self.tasks: dict[str, Callable[..., Any]] = {}
        self._names: dict[Callable[..., Any], str] = {}
        if not (isinstance(lease, (int, float)) and lease > 0):
            raise QueueError(f"Queue({name!r}): lease must be a number of seconds, got {lease!r}")
        self.store = _store(name, path, durability, float(lease), bool(listen))
        with _declared_lock:
            _declared[self.name] = self

    def __repr__(self) -> str:
        return f"Queue({self.name!r}, concurrency={self.limits.concurrency!r})"

    def task(self, fn: F | None = None, /, *, name: str | None = None) -> Any:
        """Register ``fn`` to run on this queue under ``name`` (default: its ``__name__``).

        The name is the goal of its runs, and what each entry records: keep it
        when the code moves. Returns ``fn`` unchanged.
        """

        def register(f: F) -> F:
            called = check_name("task", name if name is not None else getattr(f, "__name__", ""))
            other = self.tasks.get(called)
            if other is not None and other is not f:
                raise QueueError(
                    f"queue {self.name!r}: two functions registered as task {called!r} "
                    f"({_where(other)} and {_where(f)}); give one another name: "
                    f"@queue.task(name=...)"
                )
            self.tasks[called] = f
            self._names[f] = called
            return f

        return register(fn) if fn is not None else register

    def task_name(self, fn: Callable[..., Any] | str) -> str:
        """The registered name of ``fn`` (or ``fn`` itself, a registered name)."""
        if isinstance(fn, str):
            if fn in self.tasks:
                return fn
        else:
            found = self._names.get(fn)
            if found is not None:
                return found
        known = ", ".join(sorted(self.tasks)) or "none yet"
        raise QueueError(
            f"queue {self.name!r}: {_where(fn)} is not a task of this queue (registered: "
            f"{known}); decorate it with @queue.task, or @queue.task(name='...') to name it"
        )

    def enqueue(
        self,
        fn: Callable[..., Any] | str,
        /,
        *args: Any,
        priority: int = 0,
        dedup_key: str | None = None,
        delay: float | timedelta = 0,
        run: str | None = None,
        **kwargs: Any,
    ) -> Handle:
        """Add a run of task ``fn`` with these arguments; its :class:`Handle`.

        ``priority``: higher runs are claimed first. ``dedup_key``: while an
        entry with this key is queued or running, enqueueing it again adds
        nothing and returns that entry's handle. ``delay``: no worker starts it
        earlier. ``run``: the run's name (its idempotency key: a completed run
        of that name replays its result); default, the entry's id.
        """
        task = self.task_name(fn)
        if type(priority) is not int:
            raise QueueError(f"enqueue: priority must be an int, got {priority!r}")
        if dedup_key is not None:
            dedup_key = check_name("dedup_key", dedup_key)
        if run is not None:
            run = check_name("run", run)
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        if not seconds >= 0:
            raise QueueError(f"enqueue: delay must be 0 or more seconds, got {delay!r}")
        try:
            text = codec.encode([list(args), kwargs], self.registry)
        except EncodeError as exc:
            raise type(exc)(f"enqueue {task!r} on queue {self.name!r}: arguments: {exc}") from None
        j = children.parent()
        if j is not None:  # a child of the run open here: a step of it (children.py)
            entry, name = children.enqueue(j, self, task, run, text, priority, dedup_key, seconds)
            return Handle(self, entry, name, task)
        now = time.time()
        entry, name, _ = self.store.enqueue(
            self.name, task, run, text, priority, dedup_key, now + seconds, now
        )
        return Handle(self, entry, name, task)

    def handle(self, entry_id: str) -> Handle:
        """The handle of an entry already added (by its id); QueueError if there is none."""
        found = self.store.state(entry_id)
        if found is None:
            raise QueueError(
                f"queue {self.name!r}: no entry {entry_id!r} in {self.path or 'the journal'}"
            )
        return Handle(self, entry_id, None, None)

    def worker(self, *, threads: int = 1, processes: int = 1) -> Worker:
        """A worker for this queue: ``threads`` runs at once in each of ``processes`` processes."""
        from .queue_worker import Worker  # the same layer, loaded when a worker is made

        return Worker(self, threads=threads, processes=processes)


class Handle:
    """A queued run: its entry id, its run's name; its status and result, read from the journal.

    ``await handle`` is ``handle.result()`` without blocking the event loop.
    """

    __slots__ = ("id", "queue", "run", "task")

    def __init__(self, queue: Queue, entry_id: str, run: str | None, task: str | None) -> None:
        self.queue = queue
        self.id = entry_id
        #: The run's name (the entry id unless ``run=`` was given); None when not known here.
        self.run = run
        self.task = task

    def __repr__(self) -> str:
        return f"Handle(queue={self.queue.name!r}, id={self.id!r})"

    @property
    def run_id(self) -> str | None:
        """The run's id once a worker started it, else None."""
        found = self.queue.store.state(self.id)
        return None if found is None else found.run_id

    def status(self) -> str:
        """``queued``, ``delayed`` (queued, not due yet: a ``delay=``, a rate limit's reset,
        a parent waiting for its child; :meth:`reason` says why), ``running``,
        ``completed``, ``failed`` or ``cancelled``: the states ``lil runs`` shows."""
        found = self._state()
        if found.status == "queued" and found.not_before > utc_iso(time.time()):
            return "delayed"
        return _SAID.get(found.status, found.status)

    def reason(self) -> str | None:
        """Why it waits (a run given back to its queue: a rate limit, a child it waits
        for), or why it failed or was cancelled; None when nothing was said."""
        return self._state().error

    def _state(self) -> EntryState:
        found = self.queue.store.state(self.id)
        if found is None:
            raise QueueError(f"queue {self.queue.name!r}: entry {self.id!r} is gone")
        return found

    def cancel(self, reason: str = "cancelled") -> str:
        """Cancel it: a queued run never starts (``'cancelled'``); a running one stops at its
        next step (``'requested'``); an ended one is left as it is (its status)."""
        done = self.queue.store.cancel(self.id, time.time(), reason)
        if done is None:
            raise QueueError(f"queue {self.queue.name!r}: entry {self.id!r} is gone")
        return _SAID.get(done, done)

    def done(self) -> bool:
        """Whether it ended (completed, failed or cancelled)."""
        return self.status() in ENDED

    def result(self, timeout: float | None = None) -> Any:
        """Its result once it completed, waiting up to ``timeout`` seconds (None: forever).

        Raises TimeoutError when it did not end in time, RunCancelledError when it
        was cancelled, QueueError (with the run's error) when it failed. Inside a run
        (its body or a step's), the wait is a step of that run, its result recorded
        (``children.py``): a rerun replays it.
        """
        j = children.parent()
        if j is not None:
            return children.result(j, self, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        nap = 0.005
        while True:
            found = self._ended()
            if found is not None:
                return found()
            if deadline is not None and time.monotonic() >= deadline:
                raise self._timed_out(timeout)
            time.sleep(nap)
            nap = min(nap * 2, 0.1)

    def _timed_out(self, timeout: float | None) -> TimeoutError:
        return TimeoutError(
            f"queue {self.queue.name!r}: entry {self.id!r} did not end within {timeout} s "
            f"(status {self.status()}); wait longer, or check that a worker runs: "
            f"lil worker MODULE --queue {self.queue.name}"
        )

    def __await__(self) -> Generator[Any, None, Any]:
        j = children.parent()
        if j is not None:
            return children.async_result(j, self).__await__()
        return self._wait().__await__()

    async def _wait(self) -> Any:
        nap = 0.005
        while True:
            found = self._ended()
            if found is not None:
                return found()
            await asyncio.sleep(nap)
            nap = min(nap * 2, 0.1)

    def _ended(self) -> Callable[[], Any] | None:
        found = self.queue.store.state(self.id)
        if found is None:
            raise QueueError(f"queue {self.queue.name!r}: entry {self.id!r} is gone")
        if found.status not in ENDED:
            return None
        if found.status == "completed":
            text = found.result
            return lambda: None if text is None else codec.decode(text, self.queue.registry)
        error = found.error or found.status
        if found.status == "cancelled":
            exc: Exception = RunCancelledError(
                f"queue {self.queue.name!r}: entry {self.id!r} was cancelled ({error})",
                run_id=found.run_id,
            )
        else:
            exc = QueueError(
                f"queue {self.queue.name!r}: entry {self.id!r} (run {found.run_id}) failed: "
                f"{error}; see lil show {found.run_id}"
            )

        def raise_it() -> Any:
            raise exc

        return raise_it


def _store(
    name: str,
    path: str | os.PathLike[str] | None,
    durability: Durability,
    lease: float,
    listen: bool,
) -> SqliteQueue | PostgresQueue:
    """The queue's store: the journal file, or the PostgreSQL journal of a URL."""
    # No path: LETITLOOP_DB's, as a Journal's (its runs are opened the same way).
    text = os.fspath(path) if path is not None else os.environ.get("LETITLOOP_DB") or ""
    bad = malformed_url(text)  # a folder named postgresql: would be one queue per host
    if bad is not None:
        raise bad
    scheme = scheme_of(text)
    if scheme in ("postgresql", "postgres"):
        from ..stores.postgres.queue import PostgresQueue  # the postgres extra, only for such a URL

        return PostgresQueue(text, lease, listen)
    if scheme:
        raise QueueError(
            f"Queue({name!r}, path={text!r}): a queue lives in a journal file or on "
            f"PostgreSQL (postgresql://...), not on {scheme}://; pass a file's path or a "
            f"postgresql:// URL"
        )
    return SqliteQueue(path, durability)


def _rate(name: str, rate: tuple[int, float | str | timedelta] | None) -> tuple[int, float] | None:
    if rate is None:
        return None
    try:
        count, window = rate
    except (TypeError, ValueError):
        count, window = None, None
    seconds: float | None = None
    if isinstance(window, timedelta):
        seconds = window.total_seconds()
    elif isinstance(window, (int, float)) and not isinstance(window, bool):
        seconds = float(window)
    elif isinstance(window, str) and window[-1:] in _UNITS:
        try:
            seconds = float(window[:-1] or "1") * _UNITS[window[-1]]
        except ValueError:
            seconds = None
    if type(count) is not int or count < 1 or seconds is None or not seconds > 0:
        raise QueueError(
            f"Queue({name!r}): rate_limit must be (claims, window), e.g. (100, '1m'), (5, 1.0) "
            f"or (10, timedelta(hours=1)): a whole number 1 or more, and a window in seconds "
            f"or text with s, m, h or d; got {rate!r}"
        )
    return count, seconds


def _where(fn: object) -> str:
    if isinstance(fn, str):
        return repr(fn)
    return getattr(fn, "__qualname__", None) or repr(fn)
