"""The crash test's hook in the program under test: a ledger of step bodies, and the kill.

``lil crashtest`` (letitloop/supervision/crashtest.py) runs a program with
:data:`LEDGER_ENV` naming a file; only then does ``journal.py`` call
:func:`install`, which wraps ``Journal.step`` and ``Journal.atomic_marker``.
Without the variable nothing here is imported and the step path is
unchanged (no check, no call).

Each line of the ledger is one event, tab-separated, written with one
``write`` to a file opened ``O_APPEND`` so a SIGKILL never leaves half a
line: ``start``/``end``/``done`` POSITION KEY (a step's body began, returned,
its record was committed; then the run's id, as keys are a run's own),
``replay`` POSITION NAME (a step was called and its record replayed, its
body not run),
``mstart``/``mdone`` NAME (an ``atomic_marker``
body was offered, and its record committed), ``kill`` KIND POSITION (the
process is about to SIGKILL itself there) and ``journal`` LOCATION (once per
run and process, before its first event: where that run's journal is kept,
an absolute path or a store's URL, so the crash test reads each run's usage
where it was recorded, ``path=`` or not). A step's POSITION is where it
was called, not its key: the enclosing step's key (empty at the top) and the
number of the call under it (``fetch/2``), so a program whose keys change
from run to run is still killed, and compared, at the same place.

With :data:`KILL_ENV` set to ``KIND POSITION`` (tab-separated), the process
SIGKILLs itself there: ``before`` (the step is called, nothing of it ran),
``start`` (its body is about to run), ``end`` (its body returned, its record
is not committed), ``mstart`` (a marker's body is about to run; POSITION is
the marker's name). ``Journal.async_step`` and ``async with`` markers the same.
"""

from __future__ import annotations

import inspect
import os
import signal
import threading
from collections.abc import Callable
from functools import partial, wraps
from typing import TYPE_CHECKING, Any

from ..identity.step_names import Named
from .steps import parent_step

if TYPE_CHECKING:
    from .journal import Journal

#: The ledger file the hook appends to; set by ``lil crashtest``, never by hand.
LEDGER_ENV = "LETITLOOP_CRASHTEST_LEDGER"
#: Where the process kills itself: ``KIND<TAB>POSITION``; unset: nowhere.
KILL_ENV = "LETITLOOP_CRASHTEST_KILL"


class Ledger:
    """The ledger of this process and its one kill point."""

    def __init__(self, path: str, kill: str) -> None:
        # O_APPEND: each line lands whole at the end, whatever the process's
        # state when it is killed; no buffer to lose.
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.kill = kill
        self.lock = threading.Lock()
        self.calls: dict[str, int] = {}  # the enclosing step's key -> calls under it
        self.told: set[str] = set()  # the runs whose journal's location was noted

    def journal(self, j: Journal) -> None:
        """Note where ``j``'s run is kept, once per run: its file's absolute path, or its URL."""
        if j.run_id in self.told:
            return
        self.told.add(j.run_id)
        asked = j._path_arg  # journal.location_of's answer (journal.py sits above this)
        given = os.environ.get("LETITLOOP_DB") if asked is None else os.fspath(asked)
        # A URL as given (a store's path is its redacted form); a file, absolute.
        kept = given if given and "://" in given else os.path.abspath(os.fspath(j.path))
        self.note("journal", kept, "", j.run_id)

    def position(self) -> str:
        """Where the step being called is: ``PARENT/N`` (``/1`` for the first at the top)."""
        outer = parent_step.get()
        parent = outer[1] if outer is not None else ""
        with self.lock:
            n = self.calls[parent] = self.calls.get(parent, 0) + 1
        return f"{parent}/{n}"

    def note(self, kind: str, where: str, key: str = "", run: str = "") -> None:
        """Append one event."""
        line = f"{kind}\t{where}\t{key}\t{run}\n"
        os.write(self.fd, line.encode("utf-8", "backslashreplace"))

    def point(self, kind: str, where: str) -> None:
        """SIGKILL this process when ``kind``/``where`` is the kill point."""
        if self.kill == f"{kind}\t{where}":
            # Said first: a program that runs its work in a child process (and
            # exits on its own when the child dies) reached the point all the same.
            self.note("kill", kind, where)
            os.kill(os.getpid(), signal.SIGKILL)


def named_like(body: Callable[..., Any], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``body`` with ``fn``'s ``module.qualname``, so the step's code identity is unchanged."""
    if type(fn) is Named:
        return Named(fn.name, body)
    target: Any = fn
    while isinstance(target, partial):
        target = target.func
    target = getattr(target, "__func__", target)
    qualname = getattr(target, "__qualname__", None)
    if qualname is None:  # a callable object: named by its class, as steps.function_name does
        body.__module__, body.__qualname__ = type(target).__module__, type(target).__qualname__
    else:
        body.__module__ = getattr(target, "__module__", None) or "?"
        body.__qualname__ = qualname
    return body


def install(journal: type[Journal]) -> None:
    """Wrap ``journal.step``, ``journal.async_step`` and ``journal.atomic_marker``."""
    ledger = Ledger(os.environ[LEDGER_ENV], os.environ.get(KILL_ENV, ""))
    step = journal.step
    marker = journal.atomic_marker

    def watched_step(j: Journal, name: str, fn: Callable[..., Any], /, *a: Any, **k: Any) -> Any:
        where = ledger.position()
        ledger.point("before", where)
        ran: list[str] = []
        inner = fn.fn if type(fn) is Named else fn

        def body(*args: Any, **kwargs: Any) -> Any:
            outer = parent_step.get()
            key = outer[1] if outer is not None else name
            ran.append(key)
            ledger.journal(j)
            ledger.note("start", where, key, j.run_id)
            ledger.point("start", where)
            value = inner(*args, **kwargs)
            ledger.note("end", where, key, j.run_id)
            ledger.point("end", where)
            return value

        value = step(j, name, named_like(wraps(inner)(body), fn), *a, **k)
        if ran:
            ledger.note("done", where, ran[-1], j.run_id)
        else:
            ledger.note("replay", where, name, j.run_id)
        return value

    async def watched_async_step(
        j: Journal, name: str, fn: Callable[..., Any], /, *a: Any, **k: Any
    ) -> Any:
        from .async_steps import async_step  # loaded only by a program that has async steps

        where = ledger.position()
        ledger.point("before", where)
        ran: list[str] = []
        inner = fn.fn if type(fn) is Named else fn

        def begin() -> str:
            outer = parent_step.get()
            key = outer[1] if outer is not None else name
            ran.append(key)
            ledger.journal(j)
            ledger.note("start", where, key, j.run_id)
            ledger.point("start", where)
            return key

        def returned(key: str) -> None:
            ledger.note("end", where, key, j.run_id)
            ledger.point("end", where)

        async def awaited(*args: Any, **kwargs: Any) -> Any:
            key = begin()
            value = await inner(*args, **kwargs)
            returned(key)
            return value

        def called(*args: Any, **kwargs: Any) -> Any:  # async_step runs it in a thread
            key = begin()
            value = inner(*args, **kwargs)
            returned(key)
            return value

        body = awaited if inspect.iscoroutinefunction(inner) else called
        value = await async_step(j, name, named_like(wraps(inner)(body), fn), *a, **k)
        if ran:
            ledger.note("done", where, ran[-1], j.run_id)
        else:
            ledger.note("replay", where, name, j.run_id)
        return value

    def watched_marker(j: Journal, name: str, **options: Any) -> Any:
        return WatchedMarker(marker(j, name, **options), name, ledger)

    journal.step = watched_step
    journal.async_step = watched_async_step
    journal.atomic_marker = watched_marker


class WatchedMarker:
    """An ``AtomicMarker`` whose body's start and record are written to the ledger."""

    def __init__(self, marker: Any, name: str, ledger: Ledger) -> None:
        self.marker, self.name, self.ledger, self.offered = marker, name, ledger, False
        # A run's marker is its own (as its steps); a goal's or global one is shared.
        self.run = marker.journal.run_id if marker.scope == "run" else ""

    def __enter__(self) -> Any:
        offer = self.marker.__enter__()
        if offer:
            self.offered = True
            self.ledger.note("mstart", self.name, "", self.run)
            self.ledger.point("mstart", self.name)
        return offer

    def __exit__(self, *exc: Any) -> Any:
        clean = self.offered and exc[0] is None
        result = self.marker.__exit__(*exc)
        if clean:
            self.ledger.note("mdone", self.name, "", self.run)
        return result

    async def __aenter__(self) -> Any:
        offer = await self.marker.__aenter__()
        if offer:
            self.offered = True
            self.ledger.note("mstart", self.name, "", self.run)
            self.ledger.point("mstart", self.name)
        return offer

    async def __aexit__(self, *exc: Any) -> Any:
        clean = self.offered and exc[0] is None
        result = await self.marker.__aexit__(*exc)
        if clean:
            self.ledger.note("mdone", self.name, "", self.run)
        return result

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.marker, attribute)
