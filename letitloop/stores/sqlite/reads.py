"""The SQL of a replay's reads on a SQLite journal: a run's recorded steps and their result texts.

Statements and the packed read of a run's recorded steps (``read_recorded``),
for ``SqliteStepRows`` (``sqlite_steps.py``), which reads the rows a resumed run
replays and their results, and for ``SqliteRunRows.claim_run`` (``sqlite_runs.py``),
which reads them in the claim's own transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, TypeAlias

import msgspec

from ..storage_steps import RowHandle

#: The rowids and result texts of a stretch of a run's rows, as one row of two texts
#: (``SqliteStepRows.packed_results``): ``(first rowid, last rowid, run key)``.
#: Bounded by bytes: only the rows before the stretch's first text longer than the fourth
#: parameter (``RESULT_BYTES`` over the rows asked for), found by a scan that stops there.
PACKED_RESULTS = (
    "SELECT group_concat(rowid, ','), group_concat(result, char(31)) "
    'FROM "{table}" WHERE rowid BETWEEN ?1 AND ?2 AND +run = ?3 AND result IS NOT NULL '
    'AND rowid < coalesce((SELECT min(rowid) FROM "{table}" WHERE rowid BETWEEN ?1 AND ?2 '
    "AND +run = ?3 AND length(result) > ?4), ?2 + 1)"
)

#: Results read at once by ``SqliteStepRows.results`` from this many rows up (fewer:
#: a replay out of journal order, or a chunk's tail), as one row of two JSON arrays.
PACKED_MIN = 8

#: What ``packed_results`` puts between two result texts: the unit separator, which
#: msgspec escapes in JSON text (as checksums.step_sum relies on).
SEPARATOR = "\x1f"

#: Rows an earlier attempt left with usage that a new call of their key would overwrite:
#: a ``running`` row (its process died during the call, after the call reported usage)
#: and a ``failed`` row (the call raised, without a retry policy); see
#: sqlite_calls.KEEP_LEFT_USAGE, which keeps their usage when a new attempt claims.
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
