"""A SQLite journal's reads for a replay: a run's recorded steps and their result texts.

``SqliteReads`` is a base of ``SqliteStorage`` (``sqlite_storage.py``): the
rows a resumed run replays (``recorded_steps``, ``recorded_under``) and their
results, read a stretch of rowids at a time (``results``, ``packed_results``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, TypeAlias

import msgspec

from .errors import LetItLoopError
from .sqlite_keys import SqliteKeys
from .storage import RESULT_BYTES, RowHandle, RunKey

#: The rowids and result texts of a stretch of a run's rows, as one row of two texts
#: (``SqliteStorage.packed_results``): ``(first rowid, last rowid, run key)``.
#: Bounded by bytes: only the rows before the stretch's first text longer than the fourth
#: parameter (``RESULT_BYTES`` over the rows asked for), found by a scan that stops there.
PACKED_RESULTS = (
    "SELECT group_concat(rowid, ','), group_concat(result, char(31)) "
    'FROM "{table}" WHERE rowid BETWEEN ?1 AND ?2 AND +run = ?3 AND result IS NOT NULL '
    'AND rowid < coalesce((SELECT min(rowid) FROM "{table}" WHERE rowid BETWEEN ?1 AND ?2 '
    "AND +run = ?3 AND length(result) > ?4), ?2 + 1)"
)

#: Results read at once by ``SqliteStorage.results`` from this many rows up (fewer:
#: a replay out of journal order, or a chunk's tail), as one row of two JSON arrays.
PACKED_MIN = 8

#: What ``packed_results`` puts between two result texts: the unit separator, which
#: msgspec escapes in JSON text (as checksums.step_sum relies on).
SEPARATOR = "\x1f"

_decode_handles = msgspec.json.Decoder(list[int]).decode

#: Rows an earlier attempt left with usage that a new call of their key would overwrite:
#: a ``running`` row (its process died during the call, after the call reported usage)
#: and a ``failed`` row (the call raised, without a retry policy); see
#: sqlite_primitives.KEEP_LEFT_USAGE, which keeps their usage when a new attempt claims.
LEFT_USAGE_ROWS = (
    "status IN ('running', 'failed') AND (input_tokens IS NOT NULL "
    "OR output_tokens IS NOT NULL OR cost IS NOT NULL)"
)

#: A run's recorded steps (done steps, sleeps and waits), row by row in journal order:
#: ``{table}`` the goal's compact table, ``{keys}`` more conditions on the key (or none);
#: the first parameter the run's key.
RECORDED_ROWS = (
    "SELECT t.key, coalesce(f.name, t.fn), t.args_fp, t.rowid, t.checksum "
    'FROM "{table}" AS t LEFT JOIN functions AS f ON f.id = t.fn WHERE t.run = ? {keys}'
    "AND t.kind IN ('step', 'sleep', 'wait') AND t.status = 'done' ORDER BY t.rowid"
)

#: A run's recorded steps (``recorded_steps``: done steps, sleeps and waits), its
#: markers' keys, and how many of its rows left usage (LEFT_USAGE_ROWS), in one scan
#: of its rows: two JSON arrays, ``[[key, function, args_fp, rowid, checksum], ...]``
#: in the (run, key) index's order and ``[key, ...]``, and a count. ``{table}`` is the
#: goal's compact table; the parameter the run's key.
RECORDED_PACKED = (
    "SELECT json_group_array(json_array(t.key, coalesce(f.name, t.fn), t.args_fp, t.rowid, "
    "t.checksum)) FILTER (WHERE t.kind != 'marker' AND t.status = 'done'), "
    "json_group_array(t.key) FILTER (WHERE t.kind = 'marker'), "
    f"count(*) FILTER (WHERE {LEFT_USAGE_ROWS}) "
    'FROM "{table}" AS t LEFT JOIN functions AS f ON f.id = t.fn WHERE t.run = ?'
)

#: What ``recorded_steps`` answers: the done rows, and the markers' keys.
RecordedSteps: TypeAlias = tuple[list[tuple[str, str, str | None, RowHandle, int | None]], set[str]]

#: Typed, so that a row the protocol does not describe (a function that is no name, or none) is
#: refused here, and read row by row instead.
_decode_recorded = msgspec.json.Decoder(list[tuple[str, str, str | None, int, int | None]]).decode
_decode_keys = msgspec.json.Decoder(list[str]).decode
_HANDLE = itemgetter(3)


def read_recorded(
    query: Callable[[str, tuple[Any, ...]], Iterable[Sequence[Any]]], table: str, run: int
) -> tuple[RecordedSteps, int] | None:
    """``recorded_steps`` of the run keyed ``run`` in ``table``, and how many of its rows left
    usage, from one scan; None when the packed form cannot answer exactly (text SQLite
    cannot hand over as JSON, a row whose function is no name): read row by row then.

    One scan of the run's rows, packed by SQLite as JSON and decoded by msgspec:
    sqlite3 fetching the rows one by one costs about 4,200 instructions a row
    (packed_results), and the markers' keys were a second scan (a resume of 999 steps:
    17.0 M instructions before, 9.7 M). ``query`` runs one statement (``Store.query``,
    or a write transaction's ``execute``); its errors are the caller's.
    """
    for steps, markers, left in query(RECORDED_PACKED.format(table=table), (run,)):
        try:
            rows = _decode_recorded(steps)
            keys = _decode_keys(markers)
        except msgspec.DecodeError:
            return None
        rows.sort(key=_HANDLE)  # journal order (the scan went by the (run, key) index)
        return (rows, set(keys)), int(left)
    return None  # pragma: no cover (an aggregate answers one row)


class SqliteReads(SqliteKeys):
    """What a replay reads of the goal's compact table, for the run this storage holds; and
    what an opener reads of a run name's generations (``generation_rows``)."""

    run_key: RunKey
    #: ``(run id, recorded_steps)`` read by the claim of the run in its transaction
    #: (``SqliteStorage.claim_run``), handed to the opener's ``recorded_steps`` that
    #: follows, once: the same rows, without a second scan.
    claimed_read: tuple[str, RecordedSteps] | None = None
    #: ``PACKED_RESULTS`` for the goal's compact table, set when the table is known.
    packed_sql: str

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

    def seal_entries(self, run_id: str, after: int) -> list[Any]:
        """The entries of sealed run ``run_id``'s chain after position ``after``, in order
        (``n, key, kind, status, digest, seal``: chains.Entry)."""
        return self.store.query(
            "SELECT n, key, kind, status, digest, seal FROM seals WHERE run = ? AND n > ? "
            "ORDER BY n",
            (self.key_of_run(run_id), after),
        )

    def sealed_row(self, run_id: str, key: str) -> Any:
        """Row ``key`` of run ``run_id`` as its seal entry's digest covers it (chains.Row:
        key, kind, status, function name, args_fp, result, error, wake_at); None if none."""
        rows = self.store.query(
            "SELECT t.key, t.kind, t.status, coalesce(f.name, t.fn), t.args_fp, t.result, "
            f't.error, t.wake_at FROM "{self.rows}" AS t LEFT JOIN functions AS f '
            "ON f.id = t.fn WHERE t.run = ? AND t.key = ?",
            (self.key_of_run(run_id), key),
        )
        return tuple(rows[0]) if rows else None

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
