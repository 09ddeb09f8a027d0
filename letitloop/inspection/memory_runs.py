"""``MemoryRuns``: the in-memory store's goals and runs, found and told (the base of
:class:`~letitloop.inspection.memory_inspector.MemoryInspector`).

Its transactions (a read, and a change counted as a commit, each under the
database's lock), runs' holds, which goals and runs there are (by id, name,
prefix, filter, input), each as a :class:`RunInfo` whose state
``state.run_infos`` tells as it does for a journal file's runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..errors import JournalFileError, LetItLoopError
from ..stores.memory.database import MemoryDatabase, Row
from .decrypting import Decrypting
from .inspector_runs import RunFilter
from .memory_filters import selects, starts_with
from .records import RunInfo, RunRef
from .state import OpenRow, RunCounts, RunRow, plus, run_infos

#: Statuses of an unfinished run an unnamed opener resumes (``resumable_run_id``'s rule).
_RESUMABLE = ("running", "failed", "waiting")
#: Statuses of a row that is in flight or paused (what ``OpenRow`` reads).
_OPEN = ("running", "sleeping", "waiting", "retrying")
_USAGE = ("input_tokens", "output_tokens", "cost")


class _NoConnection:
    """The taker of an inspector's hold: no journal's connection (``abandon`` never drops it)."""


_NO_CONNECTION: Any = _NoConnection()


def _total(values: Any) -> Any:
    """The sum of the values reported, None when none was (SQL's ``sum``)."""
    total = None
    for v in values:
        total = plus(total, v)
    return total


def attempt_version(entry: tuple[Any, ...]) -> str | None:
    """An attempt's version: its sixth cell (None in an entry from before versions)."""
    return entry[5] if len(entry) > 5 else None


class MemoryRuns:
    """The goals and runs of one in-memory database."""

    def __init__(self, db: MemoryDatabase, *, write: bool = False) -> None:
        self.db = db
        self.writable = write
        self.closed = False
        #: Encrypted values as a reader shows them (LETITLOOP_ENCRYPTION_KEY).
        self._decrypt = Decrypting()

    @property
    def path(self) -> str:
        return self.db.location

    def close(self) -> None:
        self.closed = True

    # -- transactions -----------------------------------------------------------------

    @contextlib.contextmanager
    def _reading(self) -> Iterator[MemoryDatabase]:
        self._check()
        with self.db.lock:
            yield self.db

    @contextlib.contextmanager
    def _changing(self) -> Iterator[MemoryDatabase]:
        """One change: the database's lock, counted as a commit (a change notice) at its end."""
        self._check_writable()
        db = self.db
        with db.lock:
            yield db
            db.commits += 1
            db.changed.notify_all()

    def _check_writable(self) -> None:
        """Refuse a change to an inspector opened for reading only (or closed)."""
        self._check()
        if not self.writable:
            raise LetItLoopError(
                f"{self.path} was opened for reading only, so nothing was written; to change "
                f"it, open it with open_inspector(path, write=True) (reset, fork, gc, send "
                f"and cancel do)"
            )

    def _check(self) -> None:
        if self.closed:
            raise JournalFileError(
                f"{self.path}: this inspector was closed; open a new one (open_inspector)",
                path=self.path,
            )

    # -- runs' locks ------------------------------------------------------------------

    def is_held(self, run_id: str) -> bool:
        with self.db.lock:
            return ("run", run_id) in self.db.holds

    @contextlib.contextmanager
    def hold(self, run_id: str) -> Iterator[bool]:
        db, slot, me = self.db, ("run", run_id), object()
        with db.lock:
            if slot in db.holds:
                taken = False
            else:
                db.holds[slot] = (me, _NO_CONNECTION)
                taken = True
        if not taken:
            yield False
            return
        try:
            yield True
        finally:
            with db.lock:
                if db.holds.get(slot, (None,))[0] is me:
                    del db.holds[slot]
                    db.changed.notify_all()

    # -- goals and runs ---------------------------------------------------------------

    def has_goal(self, goal: str) -> bool:
        with self._reading() as db:
            return goal in db.goals

    def goal_names(self, prefix: str = "", limit: int | None = None) -> list[str]:
        with self._reading() as db:
            names = sorted(g for g in db.goals if starts_with(g, prefix))
        return names if limit is None else names[:limit]

    def has_run(self, run_id: str) -> bool:
        with self._reading() as db:
            return run_id in db.runs

    def runs(self, where: RunFilter, *, limit: int | None, offset: int = 0) -> list[RunInfo]:
        with self._reading():
            found = [r for r in self._newest_made_first() if selects(r, where)]
            if where.version is not None:
                wanted, versions = where.version, self._versions()
                found = [
                    r
                    for r in found
                    if (versions.get((r["id"], r["attempts"])) or "").startswith(wanted)
                ]
            end = None if limit is None else offset + limit
            return self._infos(found[offset:end])

    def run(self, run_id: str) -> RunInfo | None:
        with self._reading() as db:
            run = db.runs.get(run_id)
            return None if run is None else self._infos([run])[0]

    def run_of_goal(self, goal: str, ref: str) -> RunInfo | None:
        with self._reading():
            found = [r for r in self._by_id() if r["goal"] == goal and ref in (r["id"], r["name"])]
            return self._infos(found[:1])[0] if found else None

    def newest_run(self, goal: str) -> RunInfo | None:
        with self._reading():
            found = [r for r in self._newest_made_first() if r["goal"] == goal]
            return self._infos(found[:1])[0] if found else None

    def runs_named(self, name: str) -> list[RunInfo]:
        with self._reading():
            return self._infos([r for r in self._by_id(newest=True) if r["name"] == name])

    def runs_with_prefix(self, prefix: str, goal: str | None, limit: int) -> list[RunInfo]:
        low = prefix.upper()
        with self._reading():
            found = [
                r
                for r in self._by_id(newest=True)
                if r["id"].startswith(low) and (goal is None or r["goal"] == goal)
            ]
            return self._infos(found[:limit])

    def resumable_run_id(self, goal: str) -> str | None:
        with self._reading():
            for r in self._newest_made_first():
                if (
                    r["goal"] == goal
                    and r["name"] is None
                    and r["input_fp"] is None
                    and r["status"] in _RESUMABLE
                    and r["cancel_requested_at"] is None
                ):
                    return str(r["id"])
        return None

    def argument_runs(self, goal: str, limit: int) -> list[RunInfo]:
        with self._reading():
            found = [
                r
                for r in self._newest_made_first()
                if r["goal"] == goal
                and r["name"] is None
                and r["input_fp"] is not None
                and r["status"] in _RESUMABLE
                and r["cancel_requested_at"] is None
            ]
            return self._infos(found[:limit])

    def runs_updated_before(self, at: str) -> list[RunInfo]:
        with self._reading():
            return self._infos([r for r in self._by_id() if r["updated_at"] < at])

    def run_refs(self, prefix: str, limit: int) -> list[RunRef]:
        with self._reading():
            found = [
                r
                for r in self._newest_made_first()
                if starts_with(r["id"], prefix)
                or (r["name"] is not None and starts_with(r["name"], prefix))
            ]
            return [RunRef(r["id"], r["goal"], r["name"], r["status"]) for r in found[:limit]]

    def step_keys(self, ref: str, prefix: str) -> list[str]:
        with self._reading() as db:
            found = [
                r
                for r in self._by_id(newest=True)
                if ref in (r["id"], r["goal"], r["name"]) or starts_with(r["id"], ref.upper())
            ]
            found.sort(key=lambda r: r["id"] == ref, reverse=True)  # stable: newest id next
            if not found:
                return []
            run = found[0]
            return [
                row["key"]
                for row in db.rows(run["goal"])
                if row["run"] == run["id"] and starts_with(row["key"], prefix)
            ]

    # -- helpers ----------------------------------------------------------------------

    def _newest_made_first(self) -> list[dict[str, Any]]:
        return sorted(self.db.runs.values(), key=lambda r: r["order"], reverse=True)

    def _by_id(self, *, newest: bool = False) -> list[dict[str, Any]]:
        return sorted(self.db.runs.values(), key=lambda r: r["id"], reverse=newest)

    def _versions(self) -> dict[tuple[str, int], str | None]:
        """The version of the code each attempt ran, by (run id, attempt)."""
        return {(a[0], a[1]): attempt_version(a) for a in self.db.attempts}

    def _rows_of(self, goal: str, run_id: str) -> list[Row]:
        return [r for r in self.db.rows(goal) if r["run"] == run_id]

    def _infos(self, runs: list[dict[str, Any]]) -> list[RunInfo]:
        """The runs' :class:`RunInfo`: their counts, rows in flight or paused, and state."""
        versions = self._versions()
        rows = [
            RunRow(
                r["id"],
                r["goal"],
                r["name"],
                r["status"],
                r["attempts"],
                r["started_at"],
                r["updated_at"],
                r["finished_at"],
                self._decrypt.text(r["error"], r["id"], "", "run error"),
                r["holder_pid"],
                r["holder_host"],
                f"journal_{r['goal']}",
                self._decrypt.text(r["input"], r.get("input_fp") or "", r["goal"], "input"),
                r.get("forked_from"),
                r.get("forked_at"),
                r["cancel_requested_at"],
                r["cancel_reason"],
                versions.get((r["id"], r["attempts"])),
            )
            for r in runs
        ]
        open_rows: dict[str, list[OpenRow]] = {}
        for r in runs:
            open_rows[r["id"]] = [
                OpenRow(
                    row["key"],
                    row["kind"],
                    row["status"],
                    row["started_at"],
                    row["duration_ms"],
                    row["attempt"],
                    row["wake_at"],
                    row["error"],
                )
                for row in self._rows_of(r["goal"], r["id"])
                if row["status"] in _OPEN and row["kind"] != "marker"
            ]
        return run_infos(rows, self._counts(runs), open_rows, self.is_held)

    def _counts(self, runs: list[dict[str, Any]]) -> dict[str, RunCounts]:
        out: dict[str, RunCounts] = {}
        for r in runs:
            rows = self._rows_of(r["goal"], r["id"])
            if not rows:
                continue
            finished = [row["finished_at"] for row in rows if row["finished_at"] is not None]
            out[r["id"]] = RunCounts(
                sum(row["kind"] == "step" and row["status"] == "done" for row in rows),
                sum(row["kind"] == "step" and row["status"] == "failed" for row in rows),
                sum(row["kind"] == "marker" for row in rows),
                max(finished, default=None),
                *(_total(row[c] for row in rows) for c in _USAGE),
            )
        ids = {r["id"] for r in runs}
        for (run, _, _), t in self.db.tries.items():
            if run not in ids:
                continue
            counts = out.get(run, RunCounts())
            out[run] = counts._replace(
                input_tokens=plus(counts.input_tokens, t["input_tokens"]),
                output_tokens=plus(counts.output_tokens, t["output_tokens"]),
                cost=plus(counts.cost, t["cost"]),
            )
        return out

    def _empty_goals(self, going: set[str]) -> list[str]:
        db = self.db
        empty = []
        for goal in sorted(db.goals):
            runs = {r["id"] for r in db.runs.values() if r["goal"] == goal}
            if runs - going:
                continue
            if all(row["run"] in runs for row in db.goals[goal].values()):
                empty.append(goal)
        return empty
