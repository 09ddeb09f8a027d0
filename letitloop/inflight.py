"""Steps in flight, made visible to other processes without a commit for fast steps.

A step's row is written when it finishes. A step that runs for long (an LLM
call of 30 s) would be invisible until then: ``lil show`` could not say what
a run is doing, nor in which step a crashed run died. So each journal keeps
its fresh steps in flight in a dict (one set and one pop per step: no
write, no lock), and one :class:`FlightWatch` thread per journal looks at it
every :data:`SCAN_SECONDS`. A step it has seen in flight for
:data:`VISIBLE_AFTER` seconds gets a row with status ``running`` (its key,
function, start time and attempt), rewritten every :data:`HEARTBEAT_SECONDS`
with the seconds it has run so far in ``duration_ms``. The step's own final
row (``done`` or ``failed``) overwrites it; a ``running`` row is never
written over a finished row (see :data:`RUNNING_UPSERT`). A step that never
finishes (the process was killed, or a ``KeyboardInterrupt`` left it) keeps
its ``running`` row: where and for how long at least the attempt was in it
when it ended.

The thread starts with the first fresh step, ends after
:data:`IDLE_SECONDS` with no step in flight (the next step starts it again)
and is stopped, and joined, when the journal closes.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from .errors import LetItLoopError
from .store import Store, utc_iso

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

#: Insert the ``running`` row, or refresh it. Never over a finished row: a row
#: is overwritten only if it is ``running`` already, or if it was written by an
#: earlier attempt or an earlier call of the key (a ``failed`` row a retry now
#: runs again). The step's own final row has the same attempt and start time,
#: so a ``running`` row that comes after it changes nothing.
RUNNING_UPSERT = (
    'INSERT INTO "{table}" AS t (run, key, kind, status, fn, result, started_at, finished_at, '
    "duration_ms, attempt, error, traceback, args_fp) "
    "VALUES (?, ?, 'step', 'running', ?, NULL, ?, NULL, ?, ?, NULL, NULL, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET status = 'running', fn = excluded.fn, result = NULL, "
    "started_at = excluded.started_at, finished_at = NULL, duration_ms = excluded.duration_ms, "
    "attempt = excluded.attempt, error = NULL, traceback = NULL, args_fp = excluded.args_fp "
    "WHERE t.status = 'running' OR (t.status != 'done' AND (t.attempt < excluded.attempt "
    "OR t.started_at < excluded.started_at))"
)


class FlightWatch:
    """The thread that writes ``running`` rows for one journal's long steps."""

    def __init__(
        self,
        store: Store,
        table: str,
        run_id: str,
        attempt: int,
        flight: dict[str, Entry],
        clock: Callable[[], float],
        on_idle: Callable[[FlightWatch], bool],
    ) -> None:
        self.store = store
        self.sql = RUNNING_UPSERT.format(table=table)
        self.run_id = run_id
        self.attempt = attempt
        self.flight = flight
        self.clock = clock
        #: Called when nothing was in flight for IDLE_SECONDS: True lets the thread end.
        self.on_idle = on_idle
        self._stop = threading.Event()
        self.thread = threading.Thread(
            target=self._run, name=f"letitloop-inflight {run_id}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """End the thread and wait until it has ended (its write in progress completes)."""
        self._stop.set()
        if self.thread is not threading.current_thread() and self.thread.ident is not None:
            self.thread.join()

    def _run(self) -> None:
        # key -> [the entry seen, monotonic time first seen, monotonic time last written]
        seen: dict[str, list[Any]] = {}
        idle_since = time.monotonic()
        while not self._stop.wait(SCAN_SECONDS):
            now = time.monotonic()
            flight = self.flight.copy()  # atomic under the GIL; steps keep running
            if not flight:
                seen.clear()
                if now - idle_since >= IDLE_SECONDS and self.on_idle(self):
                    return
                continue
            idle_since = now
            rows = []
            for key, entry in flight.items():
                s = seen.get(key)
                if s is None or s[0] is not entry:  # a new step (or a new call of the key)
                    seen[key] = [entry, now, None]
                    continue
                _, first, written = s
                due = now - first >= VISIBLE_AFTER - SCAN_SECONDS / 2 and (
                    written is None or now - written >= HEARTBEAT_SECONDS - SCAN_SECONDS / 2
                )
                if due:
                    started, fn_name, fp = entry
                    ran_ms = max(0.0, self.clock() - started) * 1000.0  # the step's own clock
                    rows.append(
                        (self.run_id, key, fn_name, utc_iso(started), ran_ms, self.attempt, fp)
                    )
                    s[2] = now
            for key in [k for k in seen if k not in flight]:
                del seen[key]
            if rows:
                # Best effort: what a step is doing is shown, never worth failing the run
                # (a full disk or a long lock fails the step's own commit, clearly).
                with contextlib.suppress(LetItLoopError, ValueError):
                    self.store.write_many(self.sql, rows)
