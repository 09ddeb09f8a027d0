"""``MemoryStorage``: the ``Storage`` protocol in one process's memory, for tests: ``memory://NAME``.

It keeps the boundary honest: a second store that the journal, markers,
sleeps, waits, retries and cancellation use through ``storage.py`` alone,
and that the contract suite runs over (``tests/test_contract.py``). It is no
place to keep anything: its runs live as long as the process.

- **A database** is named by its URL: every journal of the process that
  opens ``memory://jobs`` meets the same runs, as every connection to one
  file does. Each journal's open is its own ``MemoryStorage``: one
  connection, with its own holds and its own change notices.
- **Transactions**: one lock per database; every operation runs under it,
  as one transaction, and reads all it needs before it changes anything.
- **Holding** a run or a marker is a slot in the database that one
  ``MemoryHold`` holds at a time; a waiter sleeps on a condition until it
  is free or its timeout passes.
- **A holder that died.** A process's memory dies with the process, so the
  death of a holder that other processes would notice cannot happen here.
  What it simulates instead is :func:`abandon`: a journal dropped without
  closing (a thread frozen mid-step, say) loses its connection: its holds
  are released, as the kernel releases a SIGKILLed process's lock files, and
  everything it tries afterwards is refused (JournalFileError), as nothing
  a dead process tries reaches a file. The contract cases that need a second
  process (a SIGKILL, processes racing for a marker) run on stores that
  other processes reach; those that fit in one process run here too.
- **Durability** is accepted and means nothing: nothing survives the process."""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .clock import utc_iso
from .errors import LetItLoopError
from .ids import HOST, new_run_id
from .memory_database import MemoryDatabase, database
from .memory_primitives import MemoryPrimitives
from .memory_seals import seal_row
from .memory_seals import start as start_sealing
from .pragmas import Durability
from .row_rules import MAX_TEXT, step_values
from .storage_runs import RunDecision, RunState
from .storage_steps import DoneRow, FunctionKey, RunKey, StepRow, step_row_of

__all__ = ["MemoryHold", "MemoryStorage", "abandon", "open_memory"]

#: A done step as ``recorded_steps`` gives it: key, function, fingerprint, rowid, checksum.
Done = tuple[str, str, str | None, int, int | None]


def open_memory(location: str, durability: Durability = "process") -> MemoryStorage:
    """The storage of one journal's open of ``memory://NAME`` (the scheme's opener)."""
    if not location.startswith("memory://") or len(location) == len("memory://"):
        raise LetItLoopError(
            f"{location}: expected memory://NAME (a name for the in-memory store), found no "
            f"name; pass e.g. memory://tests"
        )
    return MemoryStorage(database(location))


def abandon(storage: Any) -> None:
    """Drop ``storage`` as a process's death would: its holds released, all it tries refused.

    What a journal left unclosed by a holder that died looks like to the
    others (see the module docstring). ``storage`` is a journal's
    ``MemoryStorage`` (``Journal.store``).
    """
    assert isinstance(storage, MemoryStorage), storage
    storage.gone = True
    db = storage.db
    with db.lock:
        for slot, (_, taker) in list(db.holds.items()):
            if taker is storage:
                del db.holds[slot]
        db.changed.notify_all()


class MemoryHold:
    """One holder's claim on a slot of the database (a run or a marker)."""

    __slots__ = ("slot", "storage")

    def __init__(self, storage: MemoryStorage, slot: tuple[str, str]) -> None:
        self.storage = storage
        self.slot = slot

    @property
    def where(self) -> str:
        return f"{self.storage.db.location} {self.slot[0]} {self.slot[1]!r}"

    def acquire(self, timeout: float) -> bool:
        db = self.storage.db
        # math.inf waits forever, as -1 does (a Condition's wait refuses an infinite timeout).
        deadline = None if timeout < 0 or timeout == math.inf else time.monotonic() + timeout
        with db.lock:
            self.storage.check()
            while True:
                holder = db.holds.get(self.slot)
                if holder is None:
                    db.holds[self.slot] = (self, self.storage)
                    return True
                if holder[0] is self:
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                db.changed.wait(left)

    def release(self) -> None:
        db = self.storage.db
        with db.lock:
            holder = db.holds.get(self.slot)
            if holder is not None and holder[0] is self:
                del db.holds[self.slot]
                db.changed.notify_all()


class MemoryStorage(MemoryPrimitives):
    """One journal's connection to a ``MemoryDatabase``: the whole ``Storage`` protocol.

    Runs, steps, holding, change notices and identity here; markers and the
    run's primitives are its base's (``memory_primitives.py``).
    """

    def __init__(self, db: MemoryDatabase) -> None:
        super().__init__(db)
        self.path = Path(db.location)
        #: How messages name the goal's rows (SQLite: its journal table).
        self.table = ""
        #: The run the last ``find_or_start_run`` returned, as its StepRows name it.
        self.run_key = RunKey(-1)

    def function_key(self, name: str) -> FunctionKey:
        return name  # rows here keep the name itself

    # -- identity, holding, change notices, closing --------------------------------

    @property
    def max_text(self) -> int:
        return MAX_TEXT

    @property
    def identity(self) -> Hashable:
        return ("memory", self.db.location)

    def run_hold(self, run_id: str) -> MemoryHold:
        return MemoryHold(self, ("run", run_id))

    def marker_hold(self, name: str) -> MemoryHold:
        return MemoryHold(self, ("marker", name))

    def is_run_held(self, run_id: str) -> bool:
        with self.db.lock:
            return ("run", run_id) in self.db.holds

    def changes(self, *, wait: bool = True) -> int | None:
        if not self.db.lock.acquire(blocking=wait):
            return None
        try:
            self.check()
            return self.db.commits - self._own
        finally:
            self.db.lock.release()

    @contextlib.contextmanager
    def if_free(self) -> Iterator[bool]:
        if not self.db.lock.acquire(blocking=False):
            yield False
            return
        try:
            yield True
        finally:
            self.db.lock.release()

    def close(self) -> None:
        self.gone = True

    # -- runs -------------------------------------------------------------------------

    def find_or_start_run(
        self,
        goal: str,
        name: str | None,
        input_fp: str | None,
        input_text: str | None,
        now: float,
        hold: Callable[[str], None],
        *,
        version: str | None = None,
    ) -> tuple[str, bool]:
        with self._write() as db:
            self.goal = goal
            self.table = f"journal_{goal}"
            db.goals.setdefault(goal, {})
            found = None
            runs = [r for r in db.runs.values() if r["goal"] == goal]
            if name is not None:
                found = next((r["id"] for r in runs if r["name"] == name), None)
            else:
                # The opener's rule (sqlite_storage.resumable_run_id): the newest
                # unnamed run for the same input that is unfinished and not cancelled.
                for r in sorted(runs, key=lambda r: r["order"], reverse=True):
                    if (
                        r["name"] is None
                        and r["input_fp"] == input_fp
                        and r["status"] in ("running", "failed", "waiting")
                        and r["cancel_requested_at"] is None
                    ):
                        found = r["id"]
                        break
            if found is not None:
                self.run_key = RunKey(db.runs[found]["order"])
                return found, False
            run_id = new_run_id(now)
            hold(run_id)  # held before the run exists; a refusal leaves nothing behind
            started = utc_iso(now)
            db.runs[run_id] = {
                "id": run_id,
                "goal": goal,
                "name": name,
                "status": "running",
                "attempts": 1,
                "holder_pid": os.getpid(),
                "holder_host": HOST,
                "started_at": started,
                "updated_at": started,
                "finished_at": None,
                "input": input_text,
                "input_fp": input_fp,
                "result": None,
                "error": None,
                "cancel_requested_at": None,
                "cancel_reason": None,
                "order": db.run_order(),
            }
            db.attempts.append((run_id, 1, os.getpid(), HOST, started, version))
            self.run_key = RunKey(db.runs[run_id]["order"])
        return run_id, True

    def claim_run(
        self,
        run_id: str,
        now: float,
        decide: Callable[[RunState | None], RunDecision],
        *,
        version: str | None = None,
    ) -> tuple[RunDecision, RunState | None]:
        with self._write() as db:
            run = db.runs.get(run_id)
            found = None
            if run is not None:
                found = RunState(
                    status=run["status"],
                    attempts=run["attempts"],
                    result=run["result"],
                    name=run["name"],
                    cancel_requested_at=run["cancel_requested_at"],
                    cancel_reason=run["cancel_reason"],
                )
            claim = decide(found)
            stamp = utc_iso(now)
            if claim == "cancel" and run is not None and run["status"] != "cancelled":
                run["status"] = "cancelled"
                run["finished_at"] = run["finished_at"] or run["cancel_requested_at"] or stamp
                run["updated_at"] = stamp
            elif claim == "resume" and run is not None and found is not None:
                self._keep_left_usage(run_id, stamp, None)
                attempts = found.attempts + 1
                found = found._replace(attempts=attempts)
                run.update(
                    status="running",
                    attempts=attempts,
                    holder_pid=os.getpid(),
                    holder_host=HOST,
                    updated_at=stamp,
                )
                db.attempts.append((run_id, attempts, os.getpid(), HOST, stamp, version))
        return claim, found

    def run_holder(self, run_id: str) -> tuple[int | None, str | None, str | None] | None:
        with self._read():
            run = self.db.runs.get(run_id)
            return (
                None if run is None else (run["holder_pid"], run["holder_host"], run["updated_at"])
            )

    def _end_run(self, run_id: str, ended: str | None, **values: Any) -> None:
        """The run's end, and its latest attempt's (kept whatever a later one writes)."""
        with self._write() as db:
            run = db.runs.get(run_id)
            if run is not None:
                run.update(values)
                ending = (values["updated_at"], values["status"], ended)
                db.endings[run_id, run["attempts"]] = ending

    def complete_run(self, run_id: str, now: float, result: str | None) -> None:
        at = utc_iso(now)
        ended = {"status": "completed", "finished_at": at, "updated_at": at, "result": result}
        self._end_run(run_id, None, error=None, **ended)

    def fail_run(self, run_id: str, now: float, error: str) -> None:
        self._end_run(run_id, error, status="failed", updated_at=utc_iso(now), error=error)

    def cancel_run(self, run_id: str, now: float, error: str) -> None:
        at = utc_iso(now)
        self._end_run(run_id, error, status="cancelled", finished_at=at, updated_at=at, error=error)

    def leave_waiting(self, run_id: str, now: float) -> None:
        self._end_run(run_id, None, status="waiting", updated_at=utc_iso(now))

    # -- steps ------------------------------------------------------------------------

    def seal_run(self, run_id: str, secret: bytes) -> None:
        """Chain the run's final rows under ``secret`` from now on (memory_seals.py)."""
        with self._write() as db:
            rows = [r for r in db.rows(self.goal) if r["run"] == run_id]
            self.sealing[run_id] = start_sealing(db.seals, rows, run_id, secret)

    def seal_entries(self, run_id: str, after: int) -> list[Any]:
        """The entries of sealed run ``run_id``'s chain after position ``after``, in order."""
        with self._read():
            return [e for e in self.db.seals.get(run_id, ()) if e[0] > after]

    def key_check(self, goal: str, check: str | None, now: float) -> str | None:
        """The check value of the key ``goal``'s values are encrypted with; ``check`` is
        recorded first when none is (the first opener's wins)."""
        with self._read():
            stored = self.db.key_checks.get(goal)  # a read; a write only the first time
        if stored is not None or check is None:
            return stored
        with self._write() as db:
            return db.key_checks.setdefault(goal, check)

    def _done(self, run_id: str, prefix: str = "") -> list[Done]:
        return [
            (r["key"], r["fn"], r["args_fp"], r.rowid, r["checksum"])
            for r in self.db.rows(self.goal)
            if r["run"] == run_id
            and r["key"].startswith(prefix)
            and r["kind"] in ("step", "sleep", "wait")
            and r["status"] == "done"
        ]

    def recorded_steps(self, run_id: str) -> tuple[list[Done], set[str]]:
        with self._read():
            markers = {
                r["key"]
                for r in self._rows().values()
                if r["run"] == run_id and r["kind"] == "marker"
            }
            return self._done(run_id), markers

    def recorded_under(self, run_id: str, prefix: str) -> list[Done]:
        with self._read():
            return self._done(run_id, prefix)

    def results(self, rowids: Sequence[int]) -> dict[int, str | None]:
        with self._read():
            rows = self.db.by_rowid
            return {i: rows[i]["result"] for i in rowids if i in rows}

    def _put_step(self, row: StepRow) -> None:
        values = step_values(row, self.db.run_id_of(row.run))
        target = self._upsert(values["run"], values["key"])
        target.update(values, kind="step", wake_at=None)
        if self.sealing:
            seal_row(self.db.seals, self.sealing, target)

    def write_step(self, row: StepRow) -> None:
        with self._write():
            self._put_step(row)

    def write_done(self, done: DoneRow) -> None:
        self.write_step(step_row_of(done))

    def write_steps(self, rows: Sequence[StepRow]) -> None:
        with self._write():
            for row in rows:
                self._put_step(row)

    def try_write_steps(self, rows: Sequence[StepRow]) -> bool:
        if not self.db.lock.acquire(blocking=False):
            return False
        try:
            self.write_steps(rows)
        finally:
            self.db.lock.release()
        return True
