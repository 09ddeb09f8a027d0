"""The SQL of markers on a SQLite journal file: a run's or goal's in its compact table,
a global one in ``markers``.

``SqliteMarkerRows`` is ``MarkerRows`` (``storage_markers.py``), what ``markers.py``
uses; the marker's hold is ``SqliteHolding.marker_hold`` (``sqlite_holding.py``).
"""

from __future__ import annotations

from ...errors import LetItLoopError
from ...integrity.checksums import damaged_marker, marker_sum
from ...primitives.clock import utc_iso, utc_us
from ..storage_markers import MarkerAt, MarkerClaim, MarkerRecord
from .goals import iso_sql
from .keys import SqliteKeys

#: The table of global markers (see migrations/0003_markers.sql); run- and
#: goal-scoped markers are rows of the goal's journal table.
GLOBAL_TABLE = "markers"


class _Place:
    """Where a marker's row lives and how to address it.

    A plain class, not a NamedTuple: typing makes a NamedTuple class of this module
    (``from __future__ import annotations``) compiling each field's annotation text,
    0.9 M instructions of every journal's first open (issue 30).
    """

    __slots__ = ("compact", "ids", "insert_cols", "kind_sql", "table", "where")

    def __init__(
        self,
        table: str,
        where: str,
        ids: tuple[str | int, ...],
        insert_cols: tuple[tuple[str, str], ...],
        kind_sql: str,
        compact: bool,
    ) -> None:
        self.table = table
        #: SQL that selects the row, and its parameters.
        self.where = where
        self.ids = ids
        #: Columns (and values) that an INSERT adds besides the common ones.
        self.insert_cols = insert_cols
        #: The row's kind column (the global table holds markers only).
        self.kind_sql = kind_sql
        #: Whether the row is a goal's compact row (integer times) or of ``markers`` (text).
        self.compact = compact

    def select(self) -> str:
        started = iso_sql("started") if self.compact else "started_at"
        return (
            f"SELECT {self.kind_sql}, status, claims, crashes, holder_pid, holder_host, "
            f'holder_run, {started}, holder_token, checksum FROM "{self.table}" '
            f"WHERE {self.where}"
        )


class SqliteMarkerRows(SqliteKeys):
    """Markers' rows: read, claimed, finished."""

    def _place(self, at: MarkerAt) -> _Place:
        if at.scope == "global":
            return _Place(
                GLOBAL_TABLE,
                "key = ?",
                (at.name,),
                (("holder_goal", at.goal),),
                "'marker'",
                False,
            )
        return _Place(
            self.rows,
            "run = ? AND key = ?",
            (self.key_of_run(at.run), at.name),
            (("kind", "marker"),),
            "kind",
            True,
        )

    def marker(self, at: MarkerAt) -> MarkerRecord | None:
        p = self._place(at)
        rows = self.store.query(p.select(), p.ids)
        return MarkerRecord(*rows[0][:9]) if rows else None

    def claim_marker(
        self, at: MarkerAt, holder: tuple[int, str, str, str], now: float, attempt: int
    ) -> MarkerClaim:
        p = self._place(at)
        with self.store.write() as c:
            row = c.execute(p.select(), p.ids).fetchone()
            if row is None:
                cols = [col for col, _ in p.insert_cols]
                vals = [val for _, val in p.insert_cols]
                id_cols = ["key"] if p.table == GLOBAL_TABLE else ["run", "key"]
                names = [
                    *id_cols,
                    *cols,
                    "status",
                    "started" if p.compact else "started_at",
                    "attempt",
                    "claims",
                    "crashes",
                    "holder_pid",
                    "holder_host",
                    "holder_run",
                    "holder_token",
                    "checksum",
                ]
                started: int | str = utc_us(now) if p.compact else utc_iso(now)
                values = [*p.ids, *vals, "pending", started, attempt, 1, 0, *holder]
                values.append(marker_sum(at.run, at.name, "pending"))
                c.execute(
                    f'INSERT INTO "{p.table}" ({", ".join(names)}) '
                    f"VALUES ({', '.join('?' * len(values))})",
                    values,
                )
                return MarkerClaim("marker", True, 1, 0)
            kind, status, claims, crashes = row[:4]
            old_token = row[8]
            if (
                kind == "marker"
                and row[9] is not None
                and row[9] != marker_sum(at.run, at.name, status)
            ):
                raise damaged_marker(at.name, at.run, at.goal, at.scope)
            claims, crashes = claims or 0, crashes or 0
            if kind != "marker" or status == "done":
                return MarkerClaim(kind, False, claims, crashes)
            # 'pending' under both locks: its holder died inside the block
            # (a live holder keeps the lock file). 'failed': the block raised.
            if status == "pending":
                crashes += 1
            claims += 1
            extra = "".join(f", {col} = ?" for col, _ in p.insert_cols if col != "kind")
            extra_vals = [val for col, val in p.insert_cols if col != "kind"]
            times = (
                "started = ?, duration = NULL"
                if p.compact
                else "started_at = ?, finished_at = NULL, duration_ms = NULL"
            )
            cur = c.execute(
                f"UPDATE \"{p.table}\" SET status = 'pending', {times}, attempt = ?, claims = ?, "
                f"crashes = ?, holder_pid = ?, holder_host = ?, holder_run = ?, "
                f"holder_token = ?, error = NULL, traceback = NULL, checksum = ?{extra} "
                f"WHERE {p.where} AND status = ? AND holder_token IS ?",
                [
                    utc_us(now) if p.compact else utc_iso(now),
                    attempt,
                    claims,
                    crashes,
                    *holder,
                    marker_sum(at.run, at.name, "pending"),
                    *extra_vals,
                    *p.ids,
                    status,
                    old_token,
                ],
            )
            if cur.rowcount != 1:  # cannot happen inside one write transaction
                raise LetItLoopError(
                    f"marker {at.name!r} (scope={at.scope!r}): the row changed while claiming it"
                )
        return MarkerClaim("marker", True, claims, crashes)

    def finish_marker(
        self,
        at: MarkerAt,
        token: str,
        now: float,
        duration_ms: float,
        failure: tuple[str, str, int] | None,
    ) -> tuple[bool, MarkerRecord | None]:
        p = self._place(at)
        where = f"WHERE {p.where} AND status = 'pending' AND holder_token = ?"
        # A goal's compact row: its end is its start plus its duration.
        ended: tuple[int | str | float, ...]
        if p.compact:
            times, ended = "duration = ? - started", (utc_us(now),)
        else:
            times, ended = "finished_at = ?, duration_ms = ?", (utc_iso(now), duration_ms)
        with self.store.write() as c:
            if failure is None:
                cur = c.execute(
                    f"UPDATE \"{p.table}\" SET status = 'done', {times}, checksum = ? {where}",
                    (*ended, marker_sum(at.run, at.name, "done"), *p.ids, token),
                )
            else:
                error, traceback, interrupted = failure
                cur = c.execute(
                    f"UPDATE \"{p.table}\" SET status = 'failed', {times}, error = ?, "
                    f"traceback = ?, crashes = coalesce(crashes, 0) + ?, checksum = ? {where}",
                    (
                        *ended,
                        error,
                        traceback,
                        interrupted,
                        marker_sum(at.run, at.name, "failed"),
                        *p.ids,
                        token,
                    ),
                )
            if cur.rowcount == 1:
                return False, None
            row = c.execute(p.select(), p.ids).fetchone()
        return True, None if row is None else MarkerRecord(*row[:9])
