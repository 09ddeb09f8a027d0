"""Goals' journal tables: their names, their creation from the template, the readable views.

Each goal's steps live in a compact table of its own (``_journal_<goal>``), a
copy of ``_journal_template``: the run as an integer (``runs.num``), times as
integer microseconds since the epoch and a duration, the function's name as an
id of ``functions`` (see migrations/0011_compact_rows.sql). A person, ``lil``
and the LangGraph saver read it through the goal's view, ``journal_<goal>``
(the name ``goals.journal_table`` holds), with the columns the table had
before: run ids, ISO-8601 times, function names, results as JSON text. The
view takes writes too (``INSTEAD OF`` triggers turn them into the compact
row); the step path writes the compact table itself. ``journal_rows`` is the
view over every goal.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

from ...primitives.clock import utc_iso

#: The table every goal's journal table is copied from (see migrations/).
JOURNAL_TEMPLATE = "_journal_template"

#: ``journal_<word>`` names letitloop keeps for its own views and tables, now
#: and later: a goal whose readable table name would be one of them (a goal
#: named ``rows``) gets a hashed table name instead, like any goal whose name
#: is taken. Any other object already in the file is avoided the same way.
RESERVED_TABLES = frozenset(
    f"journal_{word}"
    for word in (
        "rows",
        "steps",
        "markers",
        "runs",
        "goals",
        "all",
        "view",
        "summary",
        "events",
        "usage",
        "waits",
        "sleeps",
        "signals",
        "template",
    )
)

#: What a goal's slug drops (a pattern: compiled by ``re`` when a table is named).
_SLUG_DROP = r"[^a-z0-9]+"


def journal_table_name(goal: str, *, long_hash: bool = False) -> str:
    """A readable table name for ``goal``: ``journal_<goal>``, with a hash when needed.

    Goals made only of ``[a-z0-9_]`` keep their name; any other goal gets a
    slug plus a hash of the exact name, so two goals that differ only in
    characters a table name cannot hold still get distinct tables.
    """
    slug = re.sub(_SLUG_DROP, "_", goal.lower()).strip("_")[:40]
    if slug == goal and not long_hash:
        return f"journal_{slug}"
    import hashlib  # a new goal's table name only

    digest = hashlib.sha256(goal.encode("utf-8")).hexdigest()[: 16 if long_hash else 8]
    return f"journal_{slug}_{digest}" if slug else f"journal_{digest}"


def rows_table(view: str) -> str:
    """The compact table of the goal whose view (``goals.journal_table``) is ``view``.

    The view's name with a leading underscore (``journal_<goal>`` ->
    ``_journal_<goal>``): no goal's view starts with one, and ``journal_template``
    is reserved, so it never meets the template.
    """
    return f"_{view}"


#: Statuses of a row that has a duration but has not finished: a step in flight
#: (``running``, its duration so far); its ``finished_at`` is NULL.
_UNFINISHED = "'running'"


def iso_sql(us: str) -> str:
    """SQL for integer microseconds since the epoch as ``utc_iso`` text (NULL stays NULL).

    ``2026-11-30T08:12:03.123456+00:00``, exactly what ``clock.utc_iso`` writes, in
    plain SQL that any SQLite (3.8 and later) evaluates: no function of ours.
    """
    return (
        f"strftime('%Y-%m-%dT%H:%M:%S', ({us}) / 1000000, 'unixepoch') "
        f"|| printf('.%06d+00:00', ({us}) % 1000000)"
    )


def us_sql(iso: str) -> str:
    """SQL for ISO-8601 UTC text as integer microseconds since the epoch (NULL stays NULL).

    Exact for the text ``utc_iso`` writes (32 characters ending ``+00:00``);
    any other time SQLite understands goes through ``julianday`` (rounded to
    the microsecond, about 50 µs off at worst).
    """
    return (
        f"CASE WHEN length({iso}) = 32 AND substr({iso}, 27) = '+00:00' "
        f"THEN CAST(strftime('%s', substr({iso}, 1, 19)) AS INTEGER) * 1000000 "
        f"+ CAST(substr({iso}, 21, 6) AS INTEGER) "
        f"ELSE CAST(round((julianday({iso}) - 2440587.5) * 86400000000.0) AS INTEGER) END"
    )


#: The view's columns after ``rowid``, in order (what the table held before 0011).
VIEW_COLUMNS = (
    "run",
    "key",
    "kind",
    "status",
    "fn",
    "result",
    "started_at",
    "finished_at",
    "duration_ms",
    "attempt",
    "error",
    "traceback",
    "claims",
    "crashes",
    "holder_pid",
    "holder_host",
    "holder_run",
    "holder_token",
    "args_fp",
    "input_tokens",
    "output_tokens",
    "cost",
    "model",
    "wake_at",
    "checksum",  # from 0012 (letitloop/integrity/checksums.py); not a column before 0011
)

#: The view's columns computed from the compact row ``t`` (``r``: its run, ``f``: its
#: function) by :func:`_shown`; every other column is the compact row's own, by name.
_COMPUTED = ("run", "fn", "started_at", "finished_at", "duration_ms")
#: The columns a goal's view shows as the compact row holds them, in the view's order.
_PLAIN = tuple(col for col in VIEW_COLUMNS if col not in _COMPUTED)


def _shown(run: str) -> str:
    """The select list of a goal's view over ``t``, with ``run`` as the run column."""
    expr = {
        "run": run,
        # An id of ``functions``; or the name as text, while adding it had to wait.
        "fn": "coalesce(f.name, t.fn)",
        "started_at": iso_sql("t.started"),
        "finished_at": (
            f"CASE WHEN t.status = {_UNFINISHED} THEN NULL "
            f"ELSE {iso_sql('t.started + t.duration')} END"
        ),
        "duration_ms": "t.duration / 1000.0",
    }
    cols = ["t.rowid AS rowid"]
    for col in VIEW_COLUMNS:
        cols.append(f"{expr[col]} AS {col}" if col in expr else f"t.{col} AS {col}")
    return ", ".join(cols)


def view_sql(view: str) -> str:
    """``CREATE VIEW`` of a goal's readable view over its compact table.

    Two arms: the rows of runs (joined to ``runs`` by ``num`` for the run id)
    and the goal-scoped markers (``run`` 0, shown as ``'*'``). A reader's
    ``WHERE run = ?`` reaches each arm (SQLite pushes it down), so it finds
    the run by its id and then its rows by the primary key, as before.
    """
    table = rows_table(view)
    functions = "LEFT JOIN functions AS f ON f.id = t.fn"
    return (
        f'CREATE VIEW "{view}" AS\n'
        f"SELECT {_shown('r.id')}\n"
        f'FROM "{table}" AS t JOIN runs AS r ON r.num = t.run {functions}\n'
        f"UNION ALL\n"
        f"SELECT {_shown(chr(39) + '*' + chr(39))}\n"
        f'FROM "{table}" AS t {functions} WHERE t.run = 0'
    )


def _stored(new: str) -> list[tuple[str, str]]:
    """``(column, SQL)`` of the compact row written for a view row ``new`` (NEW.* of a trigger)."""
    duration = (
        f"coalesce(({us_sql(new + '.finished_at')}) - ({us_sql(new + '.started_at')}), "
        f"CAST(round({new}.duration_ms * 1000.0) AS INTEGER))"
    )
    return [
        (
            "run",
            f"CASE WHEN {new}.run = '*' THEN 0 "
            f"ELSE (SELECT num FROM runs WHERE id = {new}.run) END",
        ),
        ("fn", f"(SELECT id FROM functions WHERE name = {new}.fn)"),
        ("started", us_sql(f"{new}.started_at")),
        ("duration", duration),
        *((col, f"{new}.{col}") for col in _PLAIN),
    ]


def trigger_sql(view: str) -> list[str]:
    """The ``INSTEAD OF`` triggers that make writes to a goal's view write its compact table.

    ``lil reset``, ``fork``, ``gc``, ``send`` and the LangGraph saver write
    through the view with the columns they always used; a SQLite browser can
    too. A function name new to the file is added to ``functions`` first.
    Trigger names hold a ``:``, which no table name of ours does.
    """
    table = rows_table(view)
    intern = "INSERT OR IGNORE INTO functions (name) SELECT NEW.fn WHERE NEW.fn IS NOT NULL;"
    stored = _stored("NEW")
    cols = ", ".join(col for col, _ in stored)
    values = ", ".join(sql for _, sql in stored)
    sets = ", ".join(f"{col} = {sql}" for col, sql in stored)
    return [
        f'CREATE TRIGGER "{view}:insert" INSTEAD OF INSERT ON "{view}" BEGIN {intern} '
        f'INSERT INTO "{table}" ({cols}) VALUES ({values}); END',
        f'CREATE TRIGGER "{view}:update" INSTEAD OF UPDATE ON "{view}" BEGIN {intern} '
        f'UPDATE "{table}" SET {sets} WHERE rowid = OLD.rowid; END',
        f'CREATE TRIGGER "{view}:delete" INSTEAD OF DELETE ON "{view}" BEGIN '
        f'DELETE FROM "{table}" WHERE rowid = OLD.rowid; END',
    ]


def create_goal_tables(conn: sqlite3.Connection, view: str) -> None:
    """Inside a write transaction: a goal's compact table (from the template), view and triggers."""
    create_rows_table(conn, view)
    create_view(conn, view)


def create_rows_table(conn: sqlite3.Connection, view: str) -> None:
    """Inside a write transaction: the compact table of the goal whose view is ``view``."""
    _copy_template(conn, rows_table(view))


def _copy_template(conn: sqlite3.Connection, table: str) -> None:
    for (sql,) in conn.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL "
        "ORDER BY type = 'index'",
        (JOURNAL_TEMPLATE,),
    ).fetchall():
        # Table names we generate hold only [a-z0-9_], so plain substitution is safe.
        conn.execute(sql.replace(JOURNAL_TEMPLATE, table))


def create_view(conn: sqlite3.Connection, view: str) -> None:
    """Inside a write transaction: a goal's readable view and its triggers."""
    conn.execute(view_sql(view))
    for sql in trigger_sql(view):
        conn.execute(sql)


def rebuild_views(conn: sqlite3.Connection) -> None:
    """Inside a write transaction: every goal's view and triggers made again from this
    version's ``view_sql`` and ``trigger_sql`` (a migration that adds a column they list)."""
    views = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
    for (view,) in conn.execute("SELECT journal_table FROM goals").fetchall():
        if view in views:  # a goal's table before 0011 has no view (its migration makes it)
            conn.execute(f'DROP VIEW "{view}"')  # its triggers go with it
            create_view(conn, view)


def delete_run_rows(conn: sqlite3.Connection, view: str, run_ids: Sequence[str]) -> int:
    """Inside a write transaction: delete the rows of runs ``run_ids`` (at most 500) from
    the goal whose view is ``view``; returns how many were deleted.

    Straight from the compact table: a delete through the view's trigger works
    too, but SQLite counts no rows changed by a trigger (``rowcount`` 0).
    """
    marks = ",".join("?" * len(run_ids))
    return int(
        conn.execute(
            f'DELETE FROM "{rows_table(view)}" WHERE run IN '
            f"(SELECT num FROM runs WHERE id IN ({marks}))",
            list(run_ids),
        ).rowcount
    )


def drop_goal_tables(conn: sqlite3.Connection, view: str) -> None:
    """Inside a write transaction: a goal's view (its triggers go with it) and compact table."""
    conn.execute(f'DROP VIEW IF EXISTS "{view}"')
    conn.execute(f'DROP TABLE IF EXISTS "{rows_table(view)}"')


class GoalTables(dict[str, str]):
    """A connection's memory of goals' tables (goal -> table), and the ``PRAGMA
    schema_version`` it was read under (``schema``: -1 before anything was read)."""

    schema = -1


def ensure_goal(conn: sqlite3.Connection, goal: str, now: float, known_tables: GoalTables) -> str:
    """Inside a write transaction: the goal's table, created from the template if new.

    ``known_tables`` is the connection's memory of goals' tables, read here and
    filled with a goal's table once read from the file. It is forgotten when the
    schema changed since it was read, checked here, inside the transaction, where
    no other connection can change it: a check before (``Store.recheck_schema``,
    at a connection's reuse) leaves a moment in which ``lil gc`` may drop the goal,
    its row and its table, and the run inserted next would name a goal that is
    gone ("FOREIGN KEY constraint failed": issue 50). One ``PRAGMA`` per open.
    """
    schema = conn.execute("PRAGMA schema_version").fetchone()[0]
    if schema != known_tables.schema:
        known_tables.clear()
        known_tables.schema = schema
    known = known_tables.get(goal)
    if known is not None:
        return known
    row = conn.execute("SELECT journal_table FROM goals WHERE goal = ?", (goal,)).fetchone()
    if row:
        known_tables[goal] = table = str(row[0])
        return table
    table = journal_table_name(goal)
    taken = (
        table in RESERVED_TABLES
        or conn.execute(
            "SELECT 1 FROM goals WHERE journal_table = ? "
            "UNION ALL SELECT 1 FROM sqlite_master WHERE name IN (?, ?) COLLATE NOCASE",
            (table, table, rows_table(table)),
        ).fetchone()
    )
    if taken:
        table = journal_table_name(goal, long_hash=True)
    compact = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'functions'"
    ).fetchone()
    if compact:
        create_goal_tables(conn, table)
    else:  # a file before 0011 (its migration moves the goal): a copy of its template
        _copy_template(conn, table)
    conn.execute(
        "INSERT INTO goals (goal, journal_table, created_at) VALUES (?, ?, ?)",
        (goal, table, utc_iso(now)),
    )
    refresh_journal_rows(conn)
    return table


#: The browsing view of every goal's rows (see migrations/0004_views.sql).
JOURNAL_ROWS_VIEW = "journal_rows"

#: The most goals ``journal_rows`` covers. Every connection parses the view's
#: SQL when it opens the file, and adding a goal rebuilds it, so a view over
#: thousands of goals would slow every ``Journal()`` open for a browsing aid
#: (benchmarks/goal_view.py: at 450 goals, uncapped, adding a goal took 15.5 ms
#: instead of 1.0 ms and opening the file 16.8 ms instead of 11.0 ms). Beyond
#: this many goals the view is left empty; query a goal's own table instead.
#: It also keeps the view under SQLite's 500-term limit on a compound SELECT.
VIEW_MAX_GOALS = 200


_COLUMNS = ", ".join(VIEW_COLUMNS)

#: ``journal_rows`` with no goal (or too many): the same columns, no rows.
JOURNAL_ROWS_PLACEHOLDER = (
    f"CREATE VIEW {JOURNAL_ROWS_VIEW} AS\n"
    f"SELECT NULL AS goal, NULL AS seq, "
    + ", ".join(f"NULL AS {col}" for col in VIEW_COLUMNS)
    + " LIMIT 0"
)


def refresh_journal_rows(conn: sqlite3.Connection) -> None:
    """Inside a write transaction: rebuild the ``journal_rows`` view over every goal's table.

    A no-op on a file whose schema has no such view yet (its migration
    creates it). With more than VIEW_MAX_GOALS goals the view is an empty
    placeholder (same columns, no rows).
    """
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = ?", (JOURNAL_ROWS_VIEW,)
    ).fetchone()
    if not row:
        return
    placeholder = JOURNAL_ROWS_PLACEHOLDER
    (count,) = conn.execute("SELECT count(*) FROM goals").fetchone()
    if count > VIEW_MAX_GOALS or count == 0:
        if row[0] == placeholder:
            return  # already given up on: adding a goal costs nothing here
        sql = placeholder
    else:
        arms = []
        for goal, table in conn.execute("SELECT goal, journal_table FROM goals ORDER BY rowid"):
            literal = "'" + str(goal).replace("'", "''") + "'"
            # Table names we generate hold only [a-z0-9_]; the goal is a quoted literal.
            arms.append(f'SELECT {literal} AS goal, rowid AS seq, {_COLUMNS} FROM "{table}"')
        sql = f"CREATE VIEW {JOURNAL_ROWS_VIEW} AS\n" + "\nUNION ALL\n".join(arms)
    conn.execute(f"DROP VIEW {JOURNAL_ROWS_VIEW}")
    conn.execute(sql)
