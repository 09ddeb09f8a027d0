"""Steps in flight, made visible to other processes without a commit for fast steps.

A step's row is written when it finishes. A step that runs for long (an LLM
call of 30 s) would be invisible until then: ``lil show`` could not say what
a run is doing, nor in which step a crashed run died. So each journal keeps
its fresh steps in flight in a dict (one set and one pop per step: no
write, no lock), and one :class:`FlightWatch` thread per process looks at
every open journal's every :data:`SCAN_SECONDS`. A step it has seen in flight for
:data:`VISIBLE_AFTER` seconds gets a row with status ``running`` (its key,
function, start time and attempt), rewritten every :data:`HEARTBEAT_SECONDS`
with the seconds it has run so far in ``duration_ms``. The step's own final
row (``done`` or ``failed``) overwrites it; a ``running`` row is never
written over a finished row (see ``sqlite_calls.RUNNING_UPSERT``). A step that never
finishes (the process was killed, or a ``KeyboardInterrupt`` left it) keeps
its ``running`` row: where and for how long at least the attempt was in it
when it ended.

The thread starts with the first fresh step of any journal and ends after
:data:`IDLE_SECONDS` with no journal open that ran a step (the next step
starts it again). A journal that closes is forgotten first: no row is
written for it afterwards.

:class:`Flight` is the one owner of a journal's steps in flight: their
entries, the usage their calls report, and the journal's place in the
watcher; its docstring says which thread writes what.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import LetItLoopError
from ..primitives.clock import utc_iso

if TYPE_CHECKING:
    from ..primitives.costs import Usage
    from ..stores.storage_calls import CallRows

#: How often the thread looks at the steps in flight.
SCAN_SECONDS = 0.5
#: A step seen in flight this long gets its ``running`` row (so it is written
#: between 1 and 1.5 s after it started). Shorter steps are never written twice.
VISIBLE_AFTER = 1.0
#: A ``running`` row is rewritten this often with the time run so far: for a
#: crashed run, "died in step X after at least N s" is off by at most this.
HEARTBEAT_SECONDS = 2.0
#: With no step in flight for this long the thread ends (the next step starts one).
IDLE_SECONDS = 2.0

#: One step in flight: (started, as the journal's clock gave it; function name; fingerprint).
Entry = tuple[float, str, str]


class Watched:
    """What the watcher needs of one open journal (its steps in flight and where to write)."""

    __slots__ = ("attempt", "clock", "flight", "lock", "open", "poll", "run_id", "storage")

    def __init__(
        self,
        storage: CallRows,
        run_id: str,
        attempt: int,
        flight: dict[str, Entry],
        clock: Callable[[], float],
    ) -> None:
        self.storage = storage
        self.run_id = run_id
        self.attempt = attempt
        self.flight = flight
        self.clock = clock
        #: Held while the watcher writes this journal's rows, and by forget():
        #: once forgotten, nothing more is written for the journal.
        self.lock = threading.Lock()
        self.open = True
        #: Called at every scan while the journal is open (letitloop/run/cancellation.py notes a
        #: cancel request there, between steps); None: nothing to call.
        self.poll: Callable[[], None] | None = None


class Flight:
    """One journal's fresh steps in flight: their entries, their calls' usage, the watcher's view.

    The one owner of that state (``Journal._flight``, made with the journal);
    no other module writes it. Thread rules:

    - ``calls`` (key -> :data:`Entry`) is written by the thread or task that
      holds the step's key (``StepKeys.claim``: one holder per key at a
      time), through :meth:`begin` and :meth:`end`, with no lock (one set and
      one pop per step). The watcher thread reads a copy (``dict.copy`` is
      atomic under the GIL); ``usage()`` and a retry read their own key.
    - ``usage`` (key -> Usage) is written by the step's function through
      ``usage()`` (:meth:`report`: in the step's thread, or the worker thread
      of an async step's plain function, which runs before the step goes on)
      and taken by the step's thread when it writes the row (:meth:`take_usage`).
    - ``watched`` (the attempt's registration with the process's watcher) is
      set by the first fresh step of an attempt (:meth:`watch`) and cleared
      when the journal closes (:meth:`forget`), both under ``lock``; the
      step path reads it without the lock (None: not watched yet).
      ``closed``, under ``lock`` too, keeps a step that starts while the
      journal closes from registering it again once forgotten; the opener
      clears it (:meth:`reopen`) before the next attempt is open. In a
      forked child only :meth:`drop` clears ``watched``, without the lock,
      which a thread of the parent may have held at the fork.
    """

    __slots__ = ("calls", "closed", "lock", "usage", "watched")

    def __init__(self) -> None:
        self.calls: dict[str, Entry] = {}
        self.usage: dict[str, Usage] = {}
        self.watched: Watched | None = None
        self.closed = False
        self.lock = threading.Lock()

    def begin(self, key: str, started: float, fn_name: str, fp: str) -> None:
        """Step ``key`` (or a new try of it) runs from ``started`` on."""
        self.calls[key] = (started, fn_name, fp)

    def end(self, key: str) -> None:
        """Step ``key`` is no longer running (returned, failed, or waits out a backoff)."""
        self.calls.pop(key, None)

    def report(self, key: str, spent: Usage) -> Usage:
        """Add ``spent`` to what step ``key``'s call reported; return the call's total so far."""
        known = self.usage.get(key)
        if known is None:
            self.usage[key] = known = spent
        else:
            known.add(spent)
        return known

    def take_usage(self, key: str) -> Usage | None:
        """What step ``key``'s call reported, handed to the row that records it (then forgotten)."""
        return self.usage.pop(key, None)

    def watch(
        self,
        still_open: Callable[[], bool],
        storage: CallRows,
        run_id: str,
        attempt: int,
        clock: Callable[[], float],
        poll: Callable[[], None],
    ) -> None:
        """Have the process's watcher look at these steps (the attempt's first fresh step).

        Nothing happens once the journal began closing (:meth:`forget`, or
        ``still_open()`` is false), or when another thread registered the
        attempt first.
        """
        with self.lock:
            if self.watched is not None or self.closed or not still_open():
                return
            watched = Watched(storage, run_id, attempt, self.calls, clock)
            watched.poll = poll
            self.watched = watched
        WATCH.watch(watched)

    def forget(self) -> None:
        """The journal closes: no ``running`` row is written for it from now on."""
        with self.lock:
            watched, self.watched = self.watched, None
            self.closed = True
        if watched is not None:
            WATCH.forget(watched)

    def reopen(self) -> None:
        """A new attempt opens: its first fresh step registers it with the watcher."""
        with self.lock:
            self.closed = False

    def drop(self) -> None:
        """In a forked child: the parent's registration is not this process's (no lock taken)."""
        self.watched = None


class FlightWatch:
    """One thread per process that writes ``running`` rows for every open journal's long steps.

    Started by the first fresh step of any journal; ends once no journal has
    been watched for :data:`IDLE_SECONDS`. One thread for the process, not one
    per journal: a program running many short runs pays no thread start per run.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[int, Watched] = {}
        self._thread: threading.Thread | None = None

    def watch(self, watched: Watched) -> None:
        """Look at ``watched``'s steps in flight from now on (idempotent)."""
        with self._lock:
            self._watched[id(watched)] = watched
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="letitloop-inflight", daemon=True
                )
                self._thread.start()

    def forget(self, watched: Watched) -> None:
        """Stop looking at ``watched``; returns once no write for it is in progress."""
        with watched.lock:
            watched.open = False
        with self._lock:
            self._watched.pop(id(watched), None)

    def _run(self) -> None:
        # (watched id, key) -> [the entry seen, time first seen, time last written]
        seen: dict[tuple[int, str], list[Any]] = {}
        idle_since = time.monotonic()
        while True:
            time.sleep(SCAN_SECONDS)
            now = time.monotonic()
            with self._lock:
                watched = list(self._watched.values())
                if not watched and now - idle_since >= IDLE_SECONDS:
                    self._thread = None
                    return
            if watched:
                idle_since = now
            live: set[tuple[int, str]] = set()
            for w in watched:
                rows = self._due(w, seen, live, now)
                if rows or w.poll is not None:
                    with w.lock:
                        if not w.open:
                            continue
                        # Best effort: what a step is doing is shown, never worth failing
                        # the run (a full disk fails the step's own commit, clearly).
                        with contextlib.suppress(LetItLoopError, ValueError):
                            if rows:
                                w.storage.write_running(rows)
                            if w.poll is not None:
                                w.poll()
            for k in [k for k in seen if k not in live]:
                del seen[k]

    @staticmethod
    def _due(
        w: Watched, seen: dict[tuple[int, str], list[Any]], live: set[tuple[int, str]], now: float
    ) -> list[tuple[Any, ...]]:
        rows = []
        for key, entry in w.flight.copy().items():  # atomic under the GIL; steps keep running
            k = (id(w), key)
            live.add(k)
            s = seen.get(k)
            if s is None or s[0] is not entry:  # a new step (or a new call of the key)
                seen[k] = [entry, now, None]
                continue
            _, first, written = s
            due = now - first >= VISIBLE_AFTER - SCAN_SECONDS / 2 and (
                written is None or now - written >= HEARTBEAT_SECONDS - SCAN_SECONDS / 2
            )
            if due:
                started, fn_name, fp = entry
                ran_ms = max(0.0, w.clock() - started) * 1000.0  # the step's own clock
                rows.append((w.run_id, key, fn_name, utc_iso(started), ran_ms, w.attempt, fp))
                s[2] = now
        return rows


#: The process's watcher.
WATCH = FlightWatch()


def _forget_after_fork() -> None:
    # A forked child has no watcher thread, and none of its parent's journals.
    global WATCH
    WATCH = FlightWatch()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
