"""``MemoryInspector``: the :class:`~letitloop.inspection.inspector.Inspector` on the in-memory
store (``memory://NAME``, ``memory_database.py``), so that ``letitloop.inspection``,
``letitloop.maintenance`` and ``letitloop.control`` read and change its runs as they do a
journal file's, in the process whose memory holds them.

What it reads is the database the journals of this process write
(``MemoryDatabase``): each read and each change runs under the database's
lock, and each change counts as a commit, so a journal of the process
notices it as it notices another connection's (a value sent to its wait).
A run is held through the database's holds, as a journal holds it. There
is no supervisor here (``lil watch`` is another process): no supervisor
events; nothing to sweep or to compact. ``lil``, a process of its own,
never reaches this store (``schemes.open_inspector`` refuses it).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
from collections.abc import Callable, Iterator
from typing import Any

from ..checksums import pause_sum, row_damaged
from ..encryption import encrypted
from ..errors import JournalFileError, LetItLoopError
from ..memory_database import MemoryDatabase, Row, existing
from ..memory_seals import chain_row
from .decrypting import Decrypting
from .inspector import RunFilter, WaitAnswer
from .records import AttemptInfo, RowInfo, RunInfo, RunRef, TryInfo, WaitRow
from .state import OpenRow, RunCounts, RunRow, plus, run_infos

#: Statuses of an unfinished run an unnamed opener resumes (``resumable_run_id``'s rule).
_RESUMABLE = ("running", "failed", "waiting")
#: Statuses of a row that is in flight or paused (what ``OpenRow`` reads).
_OPEN = ("running", "sleeping", "waiting", "retrying")
_USAGE = ("input_tokens", "output_tokens", "cost")


def open_memory_inspector(location: str, *, write: bool = False) -> MemoryInspector:
    """The inspector of ``memory://NAME``, which a journal of this process must have opened.

    Read-only unless ``write``. Raises JournalFileError when no journal of
    this process opened it (there is nothing to read; nothing is created).
    """
    db = existing(location)
    if db is None:
        raise JournalFileError(
            f"{location}: no journal of this process opened this in-memory store, so it holds "
            f"no runs; expected the memory://NAME a Journal of this process used (its runs "
            f"live as long as the process that made them)",
            path=location,
        )
    return MemoryInspector(db, write=write)


class MemoryInspector:
    """The inspector of one in-memory database (see the module's docstring)."""

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
        self._check()
        if not self.writable:
            raise LetItLoopError(
                f"{self.path} was opened for reading only, so nothing was written; to change "
                f"it, open it with open_inspector(path, write=True) (reset, fork, gc, send "
                f"and cancel do)"
            )
        db = self.db
        with db.lock:
            yield db
            db.commits += 1
            db.changed.notify_all()

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
            names = sorted(g for g in db.goals if _starts(g, prefix))
        return names if limit is None else names[:limit]

    def has_run(self, run_id: str) -> bool:
        with self._reading() as db:
            return run_id in db.runs

    def runs(self, where: RunFilter, *, limit: int | None, offset: int = 0) -> list[RunInfo]:
        with self._reading():
            found = [r for r in self._newest_made_first() if _selected(r, where)]
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
                if _starts(r["id"], prefix)
                or (r["name"] is not None and _starts(r["name"], prefix))
            ]
            return [RunRef(r["id"], r["goal"], r["name"], r["status"]) for r in found[:limit]]

    def step_keys(self, ref: str, prefix: str) -> list[str]:
        with self._reading() as db:
            found = [
                r
                for r in self._by_id(newest=True)
                if ref in (r["id"], r["goal"], r["name"]) or _starts(r["id"], ref.upper())
            ]
            found.sort(key=lambda r: r["id"] == ref, reverse=True)  # stable: newest id next
            if not found:
                return []
            run = found[0]
            return [
                row["key"]
                for row in db.rows(run["goal"])
                if row["run"] == run["id"] and _starts(row["key"], prefix)
            ]

    # -- one run in detail ------------------------------------------------------------

    def rows(self, run: RunInfo) -> list[RowInfo]:
        with self._reading():
            rows = self._rows_of(run.goal, run.id)
            return [self._decrypt.row(_row_info(r), run.id) for r in rows]

    def seal_chain(self, run: RunInfo) -> tuple[list[Any], list[Any]]:
        """The run's sealed chain (memory_seals.py) and its rows as ``inspection.verify``
        checks them; no entries for a run never sealed."""
        with self._reading() as db:
            entries = list(db.seals.get(run.id, ()))
            return entries, [chain_row(r) for r in self._rows_of(run.goal, run.id)]

    def key_check(self, run: RunInfo) -> str | None:
        """The check value of the key ``run``'s goal is encrypted with (recorded by the first
        journal that opened the goal with a key: ``key_checks``); ``""`` when none is recorded
        but the run holds encrypted values; None when it holds none (control.py's send)."""
        with self._reading() as db:
            stored = db.key_checks.get(run.goal)
            if stored is not None:
                return stored
            rows = self._rows_of(run.goal, run.id)
            held = any(encrypted(r["result"]) or encrypted(r["error"]) for r in rows)
        return "" if held or encrypted(run.input_json) else None

    def attempts(self, run_id: str) -> list[AttemptInfo]:
        with self._reading() as db:
            found = sorted((a for a in db.attempts if a[0] == run_id), key=lambda a: a[1])
            return [
                AttemptInfo(a[1], a[2], a[3], None, a[4], None, version=_attempt_version(a))
                for a in found
            ]

    def tries(self, run_id: str) -> list[TryInfo]:
        with self._reading() as db:
            found = [
                TryInfo(
                    key,
                    n,
                    t["attempt"],
                    t["started_at"],
                    t["failed_at"],
                    t["error"],
                    t["next_at"],
                    t["input_tokens"],
                    t["output_tokens"],
                    t["cost"],
                    t["model"],
                    t["ended"],
                )
                for (run, key, n), t in db.tries.items()
                if run == run_id
            ]
        return sorted(found, key=lambda t: (t.failed_at, t.number))

    def result_json(self, run_id: str) -> str | None:
        with self._reading() as db:
            run = db.runs.get(run_id)
        if run is None:
            return None
        return self._decrypt.text(run["result"], run_id, "", "run result")  # type: ignore[no-any-return]

    def previous_steps(self, run: RunInfo) -> int | None:
        with self._reading():
            prev = [
                r
                for r in self._by_id(newest=True)
                if r["goal"] == run.goal
                and r["status"] == "completed"
                and r["id"] < run.id
                and r["input"] == run.input_json
            ]
            if not prev:
                return None
            return self._counts(prev[:1]).get(prev[0]["id"], RunCounts()).done

    def replays(self, run_id: str) -> list[Any]:
        with self._reading() as db:
            return [list(keys) for run, _, keys in db.replays if run == run_id]

    def attempt_replays(self, run_id: str) -> list[tuple[int, Any]]:
        with self._reading() as db:
            return [(attempt, list(keys)) for run, attempt, keys in db.replays if run == run_id]

    def supervisor_events(self, run_id: str) -> list[dict[str, Any]]:
        return []  # no lil watch starts a run of this store: it is another process

    def last_watcher_event(self, run_id: str) -> dict[str, Any] | None:
        return None

    def waits_in_progress(self, goal: str) -> list[tuple[str, str]]:
        with self._reading() as db:
            order = {r["id"]: r["order"] for r in db.runs.values()}
            found = [
                row
                for row in db.rows(goal)
                if row["kind"] == "wait" and row["status"] == "waiting" and row["run"] in order
            ]
            found.sort(key=lambda row: -order[row["run"]])  # stable: journal order next
            return [(row["run"], row["key"]) for row in found]

    # -- changes ----------------------------------------------------------------------

    def delete_runs(self, runs: list[RunInfo]) -> int:
        with self._changing() as db:
            deleted = 0
            for run in runs:
                for row in self._rows_of(run.goal, run.id):
                    del db.goals[run.goal][(row["run"], row["key"])]
                    del db.by_rowid[row.rowid]
                    deleted += 1
                db.runs.pop(run.id, None)
                db.seals.pop(run.id, None)  # its chain (PostgreSQL: ll_seals' ON DELETE)
            ids = {run.id for run in runs}
            for slot in [t for t in db.tries if t[0] in ids]:
                del db.tries[slot]
            db.replays[:] = [r for r in db.replays if r[0] not in ids]
            db.attempts[:] = [a for a in db.attempts if a[0] not in ids]
            for traced in [t for t in db.traces if t[0] in ids]:
                del db.traces[traced]
        return deleted

    def fork(
        self,
        source: RunInfo,
        new_id: str,
        at: str,
        from_step: str,
        before_seq: int,
        rename_source: str | None,
    ) -> None:
        with self._changing() as db:
            old = db.runs[source.id]
            if rename_source is not None:
                old["name"] = rename_source
            db.runs[new_id] = {
                **dict.fromkeys(old),
                "id": new_id,
                "goal": old["goal"],
                "name": source.name,
                "status": "running",
                "attempts": 0,
                "started_at": at,
                "updated_at": at,
                "input": old["input"],
                "input_fp": old["input_fp"],
                "forked_from": source.id,
                "forked_at": from_step,
                "order": db.run_order(),
            }
            rows = db.goals[source.goal]
            for row in self._rows_of(source.goal, source.id):
                if row.rowid >= before_seq or row["status"] != "done":
                    continue
                copy = db.new_row()
                copy.update(
                    {c: row[c] for c in _COPIED},
                    run=new_id,
                    key=row["key"],
                    attempt=0,
                )
                rows[(new_id, row["key"])] = copy

    def answer_wait(
        self, run: RunInfo, choose: Callable[[list[WaitRow]], WaitAnswer]
    ) -> WaitAnswer:
        with self._changing():
            waits = [r for r in self._rows_of(run.goal, run.id) if r["kind"] == "wait"]
            answer = choose(
                [
                    WaitRow(
                        r["key"],
                        r["status"],
                        r["error"],
                        r["started_at"],
                        r["finished_at"],
                        r["wake_at"],
                    )
                    for r in waits
                ]
            )
            for r in waits:
                if r["key"] == answer.key and r["status"] == "waiting":
                    r.update(
                        status="done",
                        result=answer.result,
                        error=None,
                        finished_at=answer.finished_at,
                        duration_ms=answer.duration_ms,
                        checksum=pause_sum(run.id, answer.key, "wait", answer.result, None),
                    )
        return answer

    def cancel_now(self, run_id: str, at: str, reason: str, error: str) -> None:
        with self._changing() as db:
            run = db.runs.get(run_id)
            if run is None or run["status"] in ("completed", "cancelled"):
                return
            run.update(
                status="cancelled",
                cancel_requested_at=run["cancel_requested_at"] or at,
                cancel_reason=run["cancel_reason"] or reason,
                finished_at=at,
                updated_at=at,
                error=error,
            )

    def request_cancel(self, run_id: str, at: str, reason: str) -> None:
        with self._changing() as db:
            run = db.runs.get(run_id)
            if run is None or run["status"] in ("completed", "cancelled"):
                return
            run.update(
                cancel_requested_at=run["cancel_requested_at"] or at,
                cancel_reason=run["cancel_reason"] or reason,
                updated_at=at,
            )

    # -- gc ---------------------------------------------------------------------------

    def supervisor_events_before(self, at: str, going: set[str]) -> int:
        return 0  # it has none (see supervisor_events)

    def delete_supervisor_events(self, at: str) -> int:
        return 0

    def empty_goals(self, going: set[str]) -> list[str]:
        with self._reading():
            return self._empty_goals(going)

    def drop_empty_goals(self) -> list[str]:
        with self._changing() as db:
            gone = self._empty_goals(set())
            for goal in gone:
                for row in db.goals.pop(goal).values():
                    db.by_rowid.pop(row.rowid, None)
                db.key_checks.pop(goal, None)  # no value is left under its key
        return gone

    def size(self) -> int:
        """The characters of text it holds (runs, rows and tries): not bytes on a disk."""
        with self._reading() as db:
            values: list[Any] = [v for r in db.runs.values() for v in r.values()]
            values += [v for rows in db.goals.values() for r in rows.values() for v in r.values()]
            values += [v for t in db.tries.values() for v in t.values()]
            return sum(len(v) for v in values if isinstance(v, str))

    def sweep_locks(self) -> None:
        """Nothing to sweep: a holder that dies here (``abandon``) lets go of its holds."""

    def compact(self) -> None:
        """Nothing to give back: what was deleted is gone from memory."""

    # -- helpers ----------------------------------------------------------------------

    def _newest_made_first(self) -> list[dict[str, Any]]:
        return sorted(self.db.runs.values(), key=lambda r: r["order"], reverse=True)

    def _by_id(self, *, newest: bool = False) -> list[dict[str, Any]]:
        return sorted(self.db.runs.values(), key=lambda r: r["id"], reverse=newest)

    def _versions(self) -> dict[tuple[str, int], str | None]:
        """The version of the code each attempt ran, by (run id, attempt)."""
        return {(a[0], a[1]): _attempt_version(a) for a in self.db.attempts}

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


#: The columns a fork copies from a done row (not its usage: the source paid for it).
_COPIED = (
    "kind",
    "status",
    "fn",
    "result",
    "started_at",
    "finished_at",
    "duration_ms",
    "error",
    "traceback",
    "wake_at",
    "args_fp",
    "model",
)


class _NoConnection:
    """The taker of an inspector's hold: no journal's connection (``abandon`` never drops it)."""


_NO_CONNECTION: Any = _NoConnection()


def _starts(text: str, prefix: str) -> bool:
    """Whether ``text`` starts with ``prefix``, ASCII letters in either case (SQLite's LIKE)."""
    return text[: len(prefix)].lower() == prefix.lower()


def _total(values: Any) -> Any:
    """The sum of the values reported, None when none was (SQL's ``sum``)."""
    total = None
    for v in values:
        total = plus(total, v)
    return total


def _row_info(r: Row) -> RowInfo:
    return RowInfo(
        r.rowid,
        r["key"],
        r["kind"],
        r["status"],
        r["fn"],
        r["result"],
        r["started_at"],
        r["finished_at"],
        r["duration_ms"],
        r["attempt"],
        r["error"],
        r["traceback"],
        r["wake_at"],
        r["input_tokens"],
        r["output_tokens"],
        r["cost"],
        r["model"],
        row_damaged(
            r["run"],
            r["key"],
            r["kind"],
            r["status"],
            r["fn"],
            r["args_fp"],
            r["result"],
            r["error"],
            r["checksum"],
        ),
        r["args_fp"],
        r.get("claims"),
        r.get("crashes"),
        r.get("holder_pid"),
        r.get("holder_host"),
        r.get("holder_run"),
    )


def _attempt_version(entry: tuple[Any, ...]) -> str | None:
    """An attempt's version: its sixth cell (None in an entry from before versions)."""
    return entry[5] if len(entry) > 5 else None


def _selected(run: dict[str, Any], where: RunFilter) -> bool:
    """Whether ``where`` selects ``run`` (the conditions ``SqliteInspector`` writes in SQL)."""
    if where.goal is not None and run["goal"] != where.goal:
        return False
    if where.statuses is not None and run["status"] not in where.statuses:
        return False
    if where.since is not None and not run["started_at"] >= where.since:
        return False
    if where.until is not None and not run["started_at"] < where.until:
        return False
    if where.name is not None and (
        run["name"] is None or not fnmatch.fnmatchcase(run["name"], where.name)
    ):
        return False
    return all(_input_has(run["input"], parts, value) for parts, value in where.inputs)


def _input_has(text: str | None, parts: tuple[str, ...], value: str) -> bool:
    """Whether the recorded input ``text`` holds ``value`` at ``parts`` (see
    :attr:`RunFilter.inputs`): as recorded, tagged by the codec, or in a wrapped dict."""
    try:
        wanted: Any = json.loads(value)
    except ValueError:
        wanted = value
    try:
        recorded = json.loads(text) if text is not None else None
    except ValueError:
        return False
    for path in (parts, ("!dict", *parts)):
        found = _at(recorded, path)
        if found is _MISSING:
            continue
        if _same(found, wanted):
            return True
        if isinstance(found, dict) and any(
            k.startswith("!") and _same(v, wanted) for k, v in found.items()
        ):
            return True
    return False


_MISSING = object()


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _same(found: Any, wanted: Any) -> bool:
    """SQL's ``=`` between a JSON value and what was asked: no match for null; a container
    only equals a container; text only equals text."""
    if found is None or wanted is None:
        return False
    if isinstance(wanted, (dict, list)) or isinstance(found, (dict, list)):
        return isinstance(found, type(wanted)) and found == wanted
    if isinstance(found, str) or isinstance(wanted, str):
        return isinstance(found, str) and isinstance(wanted, str) and found == wanted
    return bool(found == wanted)
