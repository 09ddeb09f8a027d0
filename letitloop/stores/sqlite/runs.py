"""``SqliteRunRows``: a goal's runs in a SQLite journal file, found or started, claimed, ended.

``RunRows``, ``RunEnds`` and ``RecordedRuns`` on the file's ``runs`` and
``attempts`` tables: the run an opener gets (``resumable_run_id`` is the one
rule for which run an unnamed opener resumes; the opener and
``inspection.resumable_run``, ``lil reset GOAL``, both call it), its claim (a
run to resume or replay has its recorded steps read in the claim's own
transaction, ``sqlite_reads.read_recorded``, handed once to the opener's
``recorded_steps``: ``claimed_read``), the goal's key check
(``sqlite_keychecks.py``), the attempt's span, and the run's end.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...identity.ids import HOST, new_run_id
from ...primitives.clock import utc_iso
from ..storage_runs import RunDecision, RunState
from ..storage_steps import RunKey
from .calls import CLEAR_LEFT_USAGE, KEEP_LEFT_USAGE
from .keychecks import record as record_key_check
from .keychecks import stored_check
from .keys import SqliteKeys
from .reads import read_recorded
from .sqlerrors import DRIVER_ERRORS

__all__ = ["SqliteRunRows", "resumable_run_id"]

_FIND_NAMED = "SELECT id FROM runs WHERE goal = ? AND name = ?"


# Unnamed openers resume only unnamed runs opened for the same input (named
# runs are reached by their name). rowid: the order runs were made in (ids
# made in one millisecond sort in no particular order). A run cancelled, or
# asked to be, is never resumed by an opener.
_FIND_UNNAMED = (
    "SELECT id FROM runs WHERE goal = ? AND name IS NULL AND input_fp IS ? "
    "AND status IN ('running', 'failed', 'waiting') "
    "AND cancel_requested_at IS NULL ORDER BY rowid DESC LIMIT 1"
)


#: The run an unnamed replay-only opener replays: the newest for the same input, any status.
_FIND_RECORDED = (
    "SELECT id FROM runs WHERE goal = ? AND name IS NULL AND input_fp IS ? "
    "ORDER BY rowid DESC LIMIT 1"
)


def resumable_run_id(
    query: Callable[[str, tuple[Any, ...]], Iterable[Sequence[Any]]],
    goal: str,
    input_fp: str | None,
) -> str | None:
    """The run an unnamed opener of ``goal`` resumes, or None: it starts a new one.

    The one definition of that rule, for the opener (``find_or_start_run``,
    inside its write transaction) and for readers that say which run the next
    opener takes (``lil reset GOAL``, ``lil reset``'s "then"): the newest
    unnamed run of the goal opened for the same input (``input_fp``: None for
    ``Journal(goal)``, the arguments' fingerprint for ``@durable``) that is
    running, failed or waiting, and that no one asked to cancel. ``query`` runs
    one statement with its parameters (a cursor's ``execute``, ``Store.query``).
    """
    for row in query(_FIND_UNNAMED, (goal, input_fp)):
        return str(row[0])
    return None


_INSERT_RUN = (
    "INSERT INTO runs (id, goal, name, status, attempts, holder_pid, "
    "holder_host, started_at, updated_at, input, input_fp) "
    "VALUES (?, ?, ?, 'running', 1, ?, ?, ?, ?, ?, ?)"
)


#: A run's key (its step rows' ``run``), given by the trigger ``runs_num`` to every new run.
_RUN_NUM = "SELECT num FROM runs WHERE id = ?"


_INSERT_ATTEMPT = (
    "INSERT OR REPLACE INTO attempts (run, attempt, pid, host, watch_id, "
    "watch_attempt, started_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def _watch_attempt() -> int | None:
    """The supervisor's attempt number (``lil watch`` sets LETITLOOP_ATTEMPT), if any."""
    text = os.environ.get("LETITLOOP_ATTEMPT")
    if text is None or not text.isdigit():
        return None
    return int(text)


def _insert_attempt(c: Any, run_id: str, attempt: int, started: str, version: str | None) -> None:
    c.execute(
        _INSERT_ATTEMPT,
        (
            run_id,
            attempt,
            os.getpid(),
            HOST,
            os.environ.get("LETITLOOP_WATCH_ID"),
            _watch_attempt(),
            started,
            version,
        ),
    )


#: A run's end by its holder, by outcome (``SqliteRunRows._end``; named parameters).
_ENDS = {
    "completed": "UPDATE runs SET status = 'completed', finished_at = :at, updated_at = :at, "
    "result = :text, error = NULL WHERE id = :id",
    "failed": "UPDATE runs SET status = 'failed', updated_at = :at, error = :text WHERE id = :id",
    "cancelled": "UPDATE runs SET status = 'cancelled', finished_at = :at, updated_at = :at, "
    "error = :text WHERE id = :id",
    "waiting": "UPDATE runs SET status = 'waiting', updated_at = :at WHERE id = :id",
}


#: ... and how its latest attempt ended, in the same transaction.
_END_ATTEMPT = (
    "UPDATE attempts SET ended_at = :at, outcome = :outcome, error = :error WHERE run = :id "
    "AND attempt = (SELECT attempts FROM runs WHERE id = :id)"
)


class SqliteRunRows(SqliteKeys):
    """The goal's runs (``runs``) and their attempts (``attempts``) in the journal file."""

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
        store = self.store
        with store.write() as c:
            table = store.ensure_goal(c, goal, now)
            if table != self.table:
                self.use_table(table)  # the steps' statements bound to it (SqliteStepRows)
            if name is not None:
                row = c.execute(_FIND_NAMED, (goal, name)).fetchone()
                found = None if row is None else str(row[0])
            else:
                found = resumable_run_id(c.execute, goal, input_fp)
            if found is not None:
                self._keep_key(c, found)
                return found, False
            run_id = new_run_id(now)
            # Held before its row exists (nobody else knows this id, so it is
            # free at once): if the lock cannot be taken, the transaction rolls
            # back and no run is left behind. A new run is then written whole in
            # this one transaction: its row and its first attempt.
            hold(run_id)
            started = utc_iso(now)
            c.execute(
                _INSERT_RUN,
                (run_id, goal, name, os.getpid(), HOST, started, started, input_text, input_fp),
            )
            _insert_attempt(c, run_id, 1, started, version)
            self._keep_key(c, run_id)
        return run_id, True

    def recorded_run(
        self, goal: str, name: str | None, input_fp: str | None
    ) -> tuple[str, RunState] | None:
        """The run a replay-only opener replays, read without writing anything; None: no such run.

        The named run, else the goal's newest unnamed run opened for the same
        input, whatever its status (a fixture's run is usually completed).
        """
        store = self.store
        table = store.goal_table(goal)
        if table is None:
            return None
        self.use_table(table)
        if name is not None:
            found = store.query(_FIND_NAMED, (goal, name))
        else:
            found = store.query(_FIND_RECORDED, (goal, input_fp))
        if not found:
            return None
        run_id = str(found[0][0])
        row = store.query(
            "SELECT status, attempts, result, name, cancel_requested_at, cancel_reason "
            "FROM runs WHERE id = ?",
            (run_id,),
        )
        self.run_key = RunKey(self.key_of_run(run_id))
        return run_id, RunState(*row[0])

    def _keep_key(self, c: Any, run_id: str) -> None:
        (num,) = c.execute(_RUN_NUM, (run_id,)).fetchone()
        self.run_keys[run_id] = num
        self.run_key = RunKey(num)

    def claim_run(
        self,
        run_id: str,
        now: float,
        decide: Callable[[RunState | None], RunDecision],
        *,
        version: str | None = None,
    ) -> tuple[RunDecision, RunState | None]:
        # A run resumed or replayed has its recorded steps read here, in the claim's
        # transaction, for the opener's recorded_steps that follows (claimed_read): one
        # scan of the run's rows, which also tells whether any left usage to keep.
        self.claimed_read = None
        with self.store.write() as c:
            row = c.execute(
                "SELECT status, attempts, result, name, cancel_requested_at, cancel_reason "
                "FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
            found = None if row is None else RunState(*row)
            claim = decide(found)
            read = None
            if claim in ("resume", "replay"):
                try:
                    read = read_recorded(c.execute, self.rows, self.key_of_run(run_id))
                except DRIVER_ERRORS:  # that statement undone, the transaction goes on
                    read = None
            if claim == "cancel":
                assert found is not None
                c.execute(
                    "UPDATE runs SET status = 'cancelled', finished_at = coalesce("
                    "finished_at, ?), updated_at = ? WHERE id = ? AND status != 'cancelled'",
                    (found.cancel_requested_at or utc_iso(now), utc_iso(now), run_id),
                )
            elif claim == "resume":
                assert found is not None
                # Usage an earlier attempt left on rows the new calls will overwrite, kept
                # as tries: none left (the read counted none), nothing to keep; the
                # clearing picks the rows the keeping copied. Each is a scan of the run's
                # rows (1.4 M instructions for 999).
                if read is None or read[1]:
                    args = (run_id, utc_iso(now), self.key_of_run(run_id))
                    if c.execute(KEEP_LEFT_USAGE.format(table=self.rows), args).rowcount:
                        c.execute(CLEAR_LEFT_USAGE.format(table=self.rows), args)
                attempts = found.attempts + 1
                found = found._replace(attempts=attempts)
                c.execute(
                    "UPDATE runs SET status = 'running', attempts = ?, holder_pid = ?, "
                    "holder_host = ?, updated_at = ? WHERE id = ?",
                    (attempts, os.getpid(), HOST, utc_iso(now), run_id),
                )
                _insert_attempt(c, run_id, attempts, utc_iso(now), version)
        if read is not None:  # committed: the opener reads these rows next
            self.claimed_read = (run_id, read[0])
        return claim, found

    def generation_rows(
        self, goal: str, name: str, prefix: str
    ) -> list[tuple[str, str, str | None]]:
        # One range of the (goal, name) index (names compare byte by byte, BINARY): from
        # the name itself to past its prefix (``name~``, '~' then DEL); what else starts
        # like it is left to generations.py.
        high = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        rows = self.store.query(
            "SELECT name, status, finished_at FROM runs WHERE goal = ? AND name >= ? AND name < ?",
            (goal, name, high),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def key_check(self, goal: str, check: str | None, now: float) -> str | None:
        """The check value of the key ``goal``'s values are encrypted with; ``check`` is
        recorded first when none is and the file is writable (sqlite_keychecks.py)."""
        stored = stored_check(self.store, goal)  # a read; a write only the first time
        if stored is not None or check is None or self.store.readonly:
            return stored
        return record_key_check(self.store, goal, check, now)

    def trace_attempt(self, run_id: str, attempt: int, trace: str) -> str | None:
        with self.store.write() as c:
            c.execute(
                "UPDATE attempts SET trace = ? WHERE run = ? AND attempt = ?",
                (trace, run_id, attempt),
            )
            row = c.execute(
                "SELECT trace FROM attempts WHERE run = ? AND attempt < ? AND trace IS NOT NULL "
                "ORDER BY attempt DESC LIMIT 1",
                (run_id, attempt),
            ).fetchone()
        return None if row is None else str(row[0])

    # -- the run's end, by its holder, and a cancel request ------------------------

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        rows = self.store.query(
            "SELECT cancel_requested_at, cancel_reason FROM runs WHERE id = ?", (run_id,)
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def complete_run(self, run_id: str, now: float, result: str | None) -> None:
        self._end(run_id, now, "completed", result)

    def fail_run(self, run_id: str, now: float, error: str) -> None:
        self._end(run_id, now, "failed", error)

    def cancel_run(self, run_id: str, now: float, error: str) -> None:
        self._end(run_id, now, "cancelled", error)

    def leave_waiting(self, run_id: str, now: float) -> None:
        self._end(run_id, now, "waiting", None)

    def _end(self, run_id: str, now: float, outcome: str, text: str | None) -> None:
        """The run's end (``text``: its result, or its error) and its latest attempt's, in
        one transaction: the attempt keeps how it ended (migration 0019) whatever a later
        attempt writes on the run."""
        error = text if outcome in ("failed", "cancelled") else None
        values = {
            "id": run_id,
            "at": utc_iso(now),
            "text": text,
            "outcome": outcome,
            "error": error,
        }
        with self.store.write() as c:
            c.execute(_ENDS[outcome], values)
            c.execute(_END_ATTEMPT, values)
