"""A run made by ``lil fork`` on PostgreSQL: where it was forked (:func:`fork_point`), and
its copies sealed and its streams' chunks copied when it is made (:func:`finish_fork`).

``lil fork`` makes the run (``inspection/postgres_inspector.py``, through the
memory store's rules, its copies bound to it by ``inspection/fork_copies.py``).
What the fork's journal asks of it is the point it was forked at, so its
budget counts what the source spent and reserved before that point
(``budgets.carried``), as on SQLite (``sqlite_spend.py``) and the memory
store (``memory_spend.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...integrity.seals import env_seal_key
from .seals import start

__all__ = ["finish_fork", "fork_point"]

#: The run's lineage and, in journal order, the keys of its source's rows (one round trip).
_POINT = (
    "SELECT r.forked_from, r.forked_at, j.key FROM ll_runs AS r "
    "LEFT JOIN ll_journal AS j ON j.goal = r.goal AND j.run = r.forked_from "
    "WHERE r.id = %s ORDER BY j.rowid"
)


def fork_point(
    query: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]], run_id: str
) -> tuple[str, list[str]] | None:
    """For a run made by ``lil fork``: the run it was forked from and the keys of that run's
    rows before the step it was forked at, in journal order (all of them when that step is
    no longer there); None for any other run (``Storage.fork_point``). ``query`` runs one
    statement on the store's connection and returns its rows."""
    rows = query(_POINT, (run_id,))
    if not rows or rows[0][0] is None:
        return None
    source, at = str(rows[0][0]), rows[0][1]
    keys = [str(key) for _, _, key in rows if key is not None]
    return source, keys[: keys.index(at)] if at in keys else keys


def finish_fork(conn: Any, goal: str, source: str, run_id: str, before: int) -> None:
    """Inside the transaction that made fork ``run_id`` of run ``source`` (of ``goal``):
    the chunks of the source's streams whose step has a row before rowid ``before`` copied
    to it (a step the fork keeps replays its chunks; one cut by a kill is recovered); with
    ``LETITLOOP_SEAL_KEY`` set, its copied rows sealed as the new run's chain
    (``postgres_seals.start`` adopts them), as ``lil fork`` seals a journal file's
    (``sqlite_changes.bind_copied_rows``); nothing without the key (the first journal that
    opens it with one seals them then)."""
    if conn.execute("SELECT to_regclass('ll_stream_chunks')").fetchone()[0] is not None:
        conn.execute(
            "INSERT INTO ll_stream_chunks (run, key, seq, attempt, kind, data, mark, at) "
            "SELECT %s, key, seq, attempt, kind, data, mark, at FROM ll_stream_chunks "
            "WHERE run = %s AND key IN (SELECT key FROM ll_journal WHERE goal = %s "
            "AND run = %s AND rowid < %s)",
            (run_id, source, goal, source, before),
        )
    secret = env_seal_key()
    if secret is not None:
        start(conn, goal, run_id, secret)
