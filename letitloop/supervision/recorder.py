"""The journal's record of a supervisor: ``supervisor_events`` rows, and why a child stopped.

:class:`Recorder` writes one row per start, exit and decision; a journal it
cannot write warns once and never stops the restarts. A journal file keeps
them in ``supervisor_events``; a PostgreSQL journal (``postgresql://…``) in
``ll_supervisor_events`` (``postgres_events.py``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from ..errors import LetItLoopError
from ..identity.ids import HOST
from ..stores.schemes import scheme_of
from .policy import ChildExit

if TYPE_CHECKING:
    from ..stores.postgres.events import PostgresEvents
    from ..stores.sqlite.store import Store


class SqliteEvents:
    """The supervisor's records in a journal file: its ``supervisor_events`` rows."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        from ..stores.sqlite.store import Store

        self.store: Store = Store(path)
        #: What the watched child's journals open (its ``LETITLOOP_DB``): this file.
        self.location = str(self.store.path.absolute())

    def add(self, row: dict[str, Any]) -> None:
        """Record one event (a row of ``supervisor_events``, by its columns' names)."""
        self.store.write1(
            f"INSERT INTO supervisor_events ({', '.join(row)}) "
            f"VALUES ({', '.join('?' for _ in row)})",
            tuple(row.values()),
        )

    def runs_of(self, watch_id: str, attempt: int) -> list[tuple[Any, ...]]:
        """``(id, status, cancel_requested_at)`` of each run that start ``attempt`` opened."""
        return self.store.query(
            "SELECT r.id, r.status, r.cancel_requested_at FROM attempts AS a "
            "JOIN runs AS r ON r.id = a.run WHERE a.watch_id = ? AND a.watch_attempt = ? "
            "ORDER BY a.rowid",
            (watch_id, attempt),
        )

    def close(self) -> None:
        self.store.close()


def open_events(path: str | os.PathLike[str] | None) -> SqliteEvents | PostgresEvents:
    """Where a supervisor records: ``path``, else ``$LETITLOOP_DB``, else the default file;
    a ``postgresql://`` URL is that database, any other URL refused as a journal file is."""
    location = path if path is not None else os.environ.get("LETITLOOP_DB") or None
    if location is not None and scheme_of(location) in ("postgresql", "postgres"):
        from ..stores.postgres.events import PostgresEvents

        return PostgresEvents(os.fspath(location))
    return SqliteEvents(path)


class Recorder:
    """Writes ``supervisor_events`` rows; a failing journal warns once, never stops the loop."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        watch_id: str,
        target: str,
        err: IO[str],
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.watch_id = watch_id
        self.target = target
        self.err = err
        self.wall = wall
        self.host = HOST
        # Opening the journal up front makes a bad --db path fail before any start.
        self.events = open_events(path)
        #: The journal the records go to, as the child's LETITLOOP_DB names it.
        self.location = self.events.location
        self._warned = False

    def exited(self, attempt: int, pid: int, how: ChildExit, uptime: float, line: str) -> None:
        """Record the child's death: its status or signal and how long it stayed up."""
        self.record(
            "exit",
            attempt,
            child_pid=pid,
            exit_code=how.status,
            signal=how.signal_name,
            uptime_s=round(uptime, 6),
            message=line,
        )

    def record(self, event: str, attempt: int, **values: Any) -> None:
        from ..primitives.clock import utc_iso

        row = {
            "watch_id": self.watch_id,
            "at": utc_iso(self.wall()),
            "event": event,
            "target": self.target,
            "attempt": attempt,
            "watcher_pid": os.getpid(),
            "host": self.host,
            **values,
        }
        try:
            self.events.add(row)
        except LetItLoopError as exc:
            # Liveness comes first: a journal we cannot write must not stop the restarts.
            if not self._warned:
                self._warned = True
                print(f"lil: warning: cannot record supervisor events: {exc}", file=self.err)

    def stopped_by_choice(self, attempt: int) -> str | None:
        """Why a child that exited must not be restarted, read from the journal; None: no reason.

        A child whose runs (those its attempt opened) ended ``cancelled`` (or
        were asked to be), or stopped to wait for outside input (``waiting``),
        with none left unfinished, ended on purpose: starting it again would
        start a new run, or stop at once. The journal is read rather than the
        exit status, because an uncaught RunCancelledError exits 1 like any
        error, and a program may catch and re-raise it as something else.
        """
        try:
            rows = self.events.runs_of(self.watch_id, attempt)
        except LetItLoopError:
            return None  # liveness first: no journal, no reason to stop
        why: list[str] = []
        for run_id, status, cancel_at in rows:
            if status == "cancelled" or (status == "running" and cancel_at is not None):
                why.append(f"run {run_id} was cancelled")
            elif status == "waiting":
                why.append(
                    f"run {run_id} stopped to wait for outside input (send it with lil send "
                    f"{run_id} NAME VALUE, then start it again)"
                )
            elif status in ("running", "failed"):
                return None  # a run to resume: restart
        return "; ".join(why) or None

    def close(self) -> None:
        self.events.close()
