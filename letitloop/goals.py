"""Goals' journal tables: their names, their creation from the template, the ``journal_rows`` view.

Each goal's steps live in a table of its own (``journal_<goal>``), a copy of
``_journal_template``; ``journal_rows`` is a browsing view over all of them.
"""

from __future__ import annotations

import re
import sqlite3

from .clock import utc_iso

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

_SLUG_DROP = re.compile(r"[^a-z0-9]+")


def journal_table_name(goal: str, *, long_hash: bool = False) -> str:
    """A readable table name for ``goal``: ``journal_<goal>``, with a hash when needed.

    Goals made only of ``[a-z0-9_]`` keep their name; any other goal gets a
    slug plus a hash of the exact name, so two goals that differ only in
    characters a table name cannot hold still get distinct tables.
    """
    slug = _SLUG_DROP.sub("_", goal.lower()).strip("_")[:40]
    if slug == goal and not long_hash:
        return f"journal_{slug}"
    import hashlib  # a new goal's table name only

    digest = hashlib.sha256(goal.encode("utf-8")).hexdigest()[: 16 if long_hash else 8]
    return f"journal_{slug}_{digest}" if slug else f"journal_{digest}"


def ensure_goal(
    conn: sqlite3.Connection, goal: str, now: float, known_tables: dict[str, str]
) -> str:
    """Inside a write transaction: the goal's table, created from the template if new.

    ``known_tables`` is the connection's memory of goals' tables (goal -> table),
    read here and filled with a goal's table once read from the file.
    """
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
            "UNION ALL SELECT 1 FROM sqlite_master WHERE name = ? COLLATE NOCASE",
            (table, table),
        ).fetchone()
    )
    if taken:
        table = journal_table_name(goal, long_hash=True)
    for (sql,) in conn.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL "
        "ORDER BY type = 'index'",
        (JOURNAL_TEMPLATE,),
    ).fetchall():
        # Table names we generate hold only [a-z0-9_], so plain substitution is safe.
        conn.execute(sql.replace(JOURNAL_TEMPLATE, table))
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
    placeholder = (
        f"CREATE VIEW {JOURNAL_ROWS_VIEW} AS\n"
        f"SELECT NULL AS goal, rowid AS seq, * FROM {JOURNAL_TEMPLATE}"
    )
    (count,) = conn.execute("SELECT count(*) FROM goals").fetchone()
    if count > VIEW_MAX_GOALS:
        if row[0] == placeholder:
            return  # already given up on: adding a goal costs nothing here
        sql = placeholder
    else:
        arms = [placeholder.split("\n", 1)[1]]
        for goal, table in conn.execute("SELECT goal, journal_table FROM goals ORDER BY rowid"):
            literal = "'" + str(goal).replace("'", "''") + "'"
            # Table names we generate hold only [a-z0-9_]; the goal is a quoted literal.
            arms.append(f'SELECT {literal} AS goal, rowid AS seq, * FROM "{table}"')
        sql = f"CREATE VIEW {JOURNAL_ROWS_VIEW} AS\n" + "\nUNION ALL\n".join(arms)
    conn.execute(f"DROP VIEW {JOURNAL_ROWS_VIEW}")
    conn.execute(sql)
