"""``SqliteStepRows``: a run's step rows in a SQLite journal file, written and read back.

A step's row is one statement bound once per goal table (``use_table``) to
``Store.write1``: a fresh step's row, a ``DoneRow`` without its empty columns,
goes through ``write_done`` (a ``functools.partial`` of ``Store.write1`` and
``UPSERT_DONE``), so the protocol costs a fresh step no extra Python call;
``write_step`` writes any other row. A replay reads the run's recorded steps
(one packed scan, ``sqlite_reads.read_recorded``, or row by row where that
cannot answer exactly) and their result texts, a stretch of rowids at a time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import msgspec

from ...errors import LetItLoopError
from ..storage_steps import RESULT_BYTES, DoneRow, RowHandle, StepRow
from .keys import SqliteKeys
from .reads import PACKED_MIN, PACKED_RESULTS, RECORDED_ROWS, SEPARATOR, read_recorded
from .store import Store

__all__ = ["UPSERT_DONE", "UPSERT_STEP", "SqliteStepRows", "step_writer"]

#: The row of a step that returned or failed, over the key's earlier row if any
#: (its ``running`` or ``retrying`` row); ``{table}`` is the goal's compact table
#: and the parameters a ``StepRow``, in its order.
UPSERT_STEP = (
    'INSERT INTO "{table}" (run, key, kind, status, fn, result, started, duration, '
    "attempt, error, traceback, args_fp, input_tokens, output_tokens, cost, model, checksum) "
    "VALUES (?, ?, 'step', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET status = excluded.status, fn = excluded.fn, "
    "result = excluded.result, started = excluded.started, duration = excluded.duration, "
    "attempt = excluded.attempt, error = excluded.error, traceback = excluded.traceback, "
    "args_fp = excluded.args_fp, input_tokens = excluded.input_tokens, "
    "output_tokens = excluded.output_tokens, cost = excluded.cost, model = excluded.model, "
    "checksum = excluded.checksum, wake_at = NULL"
)


#: UPSERT_STEP for the usual row: a step that returned, whose function reported no
#: usage. Its NULLs (error, traceback, the usage columns) are written in the SQL, not
#: bound: sqlite3 binds each None through its adapter lookup, which before Python 3.12
#: formats and clears an AttributeError per None (six of them: about 13,000
#: instructions, 2 µs, of a 4 µs statement). Parameters: ``done_params`` of a StepRow.
UPSERT_DONE = (
    'INSERT INTO "{table}" (run, key, kind, status, fn, result, started, duration, '
    "attempt, args_fp, checksum) VALUES (?, ?, 'step', ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (run, key) DO UPDATE SET status = excluded.status, fn = excluded.fn, "
    "result = excluded.result, started = excluded.started, duration = excluded.duration, "
    "attempt = excluded.attempt, error = NULL, traceback = NULL, "
    "args_fp = excluded.args_fp, input_tokens = NULL, output_tokens = NULL, cost = NULL, "
    "model = NULL, checksum = excluded.checksum, wake_at = NULL"
)


def step_writer(
    write1: Callable[[str, Sequence[Any]], None], upsert_sql: str, done_sql: str
) -> Callable[[StepRow], None]:
    """``write_step`` of a goal's table: one statement, its own transaction (``Store.write1``).

    A row with no error, traceback nor usage goes through ``done_sql`` (UPSERT_DONE),
    with its other columns bound; any other through ``upsert_sql`` (UPSERT_STEP), the
    whole row bound. Both write the same row (tests/test_sqlite_storage.py).
    """

    def write_step(row: StepRow) -> None:
        if row[8] is None and row[9] is None and row[11:15] == _NO_USAGE:
            write1(done_sql, (*row[:8], row[10], row[15]))
        else:
            write1(upsert_sql, row)

    return write_step


_NO_USAGE = (None, None, None, None)


_decode_handles = msgspec.json.Decoder(list[int]).decode


class SqliteStepRows(SqliteKeys):
    """The goal's compact rows of the run this storage holds: written, read back for a replay."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.upsert_sql = ""
        self.done_sql = ""
        #: ``PACKED_RESULTS`` for the goal's compact table, set when the table is known.
        self.packed_sql = ""
        #: Commit one step row: ``store.write1`` with the statement bound (no extra call).
        self.write_step: Callable[[StepRow], None] = self._not_found
        self.write_done: Callable[[DoneRow], None] = self._not_found

    def use_table(self, table: str) -> None:
        """The goal's table, and this part's statements bound to it."""
        super().use_table(table)
        store = self.store
        self.upsert_sql = UPSERT_STEP.format(table=self.rows)
        self.done_sql = UPSERT_DONE.format(table=self.rows)
        self.packed_sql = PACKED_RESULTS.format(table=self.rows)
        self.write_step = step_writer(store.write1, self.upsert_sql, self.done_sql)
        # A fresh step's row, bound as it is: no Python frame of ours before write1.
        self.write_done = partial(store.write1, self.done_sql)

    @property
    def max_text(self) -> int:
        return self.store.max_text

    def _not_found(self, row: StepRow | DoneRow) -> None:
        raise AssertionError("find_or_start_run comes before any step is written")

    def write_steps(self, rows: Sequence[StepRow]) -> None:
        if not any(type(r[3]) is str for r in rows):
            self.store.write_many(self.upsert_sql, rows)
            return
        with self.store.write() as c:
            made = self._interned(c, rows)
        self.store.function_keys.update(made)

    def try_write_steps(self, rows: Sequence[StepRow]) -> bool:
        if not any(type(r[3]) is str for r in rows):
            return self.store.try_write_many(self.upsert_sql, rows)
        with self.store.try_write() as c:
            if c is None:
                return False
            made = self._interned(c, rows)
        self.store.function_keys.update(made)
        return True

    def _interned(self, c: Any, rows: Sequence[StepRow]) -> dict[str, int]:
        """Inside a write transaction: ``rows`` written, each function name a row holds
        as text (function_key could not add it on an event loop) added to ``functions``
        and written as its id; returns the names added, remembered once committed."""
        made = {name: self.intern(c, name) for name in {r[3] for r in rows if type(r[3]) is str}}
        c.executemany(
            self.upsert_sql,
            [r._replace(fn=made[r[3]]) if type(r[3]) is str else r for r in rows],
        )
        return made

    def recorded_steps(
        self, run_id: str
    ) -> tuple[list[tuple[str, str, str | None, RowHandle, int | None]], set[str]]:
        # What the claim of this run read in its transaction, if it did (claimed_read).
        kept, self.claimed_read = self.claimed_read, None
        if kept is not None and kept[0] == run_id:
            return kept[1]
        run = self.key_of_run(run_id)
        try:
            read = read_recorded(self.store.query, self.rows, run)
        except LetItLoopError:
            read = None
        if read is None:
            return self.recorded_steps_by_row(run)
        return read[0]

    def recorded_steps_by_row(
        self, run: int
    ) -> tuple[list[tuple[str, str, str | None, RowHandle, int | None]], set[str]]:
        """``recorded_steps`` of the run keyed ``run``, read row by row: what the packed
        read falls back to when it cannot answer exactly (text SQLite cannot hand over as
        JSON, a row whose function is no name), meeting whatever error the rows hold."""
        store, table = self.store, self.rows
        rows = store.query(RECORDED_ROWS.format(table=table, keys=""), (run,))
        markers = store.query(
            f"SELECT key FROM \"{table}\" WHERE run = ? AND kind = 'marker'", (run,)
        )
        return rows, {key for (key,) in markers}

    def recorded_under(
        self, run_id: str, prefix: str
    ) -> list[tuple[str, str, str | None, RowHandle, int | None]]:
        # Keys from prefix up to (not including) prefix with its last character
        # incremented: a range of the primary key (run, key), not a scan.
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return self.store.query(
            RECORDED_ROWS.format(table=self.rows, keys="AND t.key >= ? AND t.key < ? "),
            (self.key_of_run(run_id), prefix, end),
        )

    def results(self, handles: Sequence[RowHandle]) -> dict[RowHandle, str | None]:
        # ``handles`` come ascending (replay.Results). When they fill most of their
        # stretch of rowids (a run's rows, written one after another), one range scan
        # reads them with no lookup per rowid (0.1 µs less per replayed step); the
        # few other rows of the run in the stretch (a failed step, a marker) come
        # with them, at most as many again (``+run``: the rowid range, not the
        # (run, key) index, picks the rows).
        # At most RESULT_BYTES of texts (and the first row's whole): the packed read takes
        # only rows up to RESULT_BYTES / len(handles) bytes each, the row by row read stops
        # once the texts it read reach RESULT_BYTES.
        first, last = handles[0], handles[-1]
        if 0 <= last - first < 2 * len(handles):
            if len(handles) >= PACKED_MIN:
                packed = self.packed_results(first, last, RESULT_BYTES // len(handles))
                if packed is not None and first in packed:
                    return packed
            return self.bounded_rows(
                f'SELECT rowid, result FROM "{self.rows}" WHERE rowid BETWEEN ? AND ? '
                "AND +run = ? ORDER BY rowid",
                (first, last, self.run_key),
            )
        marks = ",".join("?" * len(handles))
        return self.bounded_rows(
            f'SELECT rowid, result FROM "{self.rows}" WHERE rowid IN ({marks}) ORDER BY rowid',
            handles,
        )

    def bounded_rows(self, sql: str, params: Sequence[Any]) -> dict[RowHandle, str | None]:
        """``(rowid, result)`` rows of ``sql``, fetched one at a time until their texts reach
        ``RESULT_BYTES`` (characters: as many bytes for the JSON text a step records); its
        errors explained as ``Store.query``'s."""
        store, found, size = self.store, {}, 0
        with store.lock:
            try:
                for rowid, text in store.conn.execute(sql, params):
                    found[rowid] = text
                    if text is not None:
                        size += len(text)
                        if size >= RESULT_BYTES:
                            break
            except (sqlite3.Error, UnicodeError) as exc:
                raise store.explain(exc) from None
        return found

    def packed_results(
        self, first: RowHandle, last: RowHandle, each: int
    ) -> dict[RowHandle, str | None] | None:
        """``results`` of the run's rows from rowid ``first`` to ``last``, read as one row,
        up to the first whose text is longer than ``each`` (characters; bytes as JSON).

        SQLite joins the rowids (by commas) and the result texts (by the unit
        separator, which a JSON text holds only escaped) in one pass, and Python
        splits them: sqlite3 fetching the rows one by one costs about 4,200
        instructions a row (two mutexes and a GIL switch per row, three calls per
        value). Rows without a result are left out (their key is read row by row).
        None when this way cannot answer exactly: a text holding the separator (more
        texts than rowids), no JSON or text SQLite can hand Python; the caller then
        reads row by row, as before, and meets whatever error the rows hold there
        (tests/test_replay_reads.py holds the two reads to one answer).
        """
        try:
            ((ids, texts),) = self.store.query(self.packed_sql, (first, last, self.run_key, each))
        except LetItLoopError:
            return None
        if ids is None:
            return {}
        handles = _decode_handles(f"[{ids}]")
        results = texts.split(SEPARATOR)
        if len(results) != len(handles):
            return None
        return dict(zip(handles, results, strict=True))

    def record_replays(self, run_id: str, attempt: int, keys: Sequence[str]) -> None:
        # One row per batch (its keys as a JSON list): a resume that replays
        # thousands of steps writes one small row, not thousands.
        self.store.write1(
            "INSERT INTO step_replays (run, attempt, keys) VALUES (?, ?, ?)",
            (run_id, attempt, msgspec.json.encode(list(keys)).decode()),
        )
