"""A run made by ``lil fork`` on PostgreSQL: where it was forked (:func:`fork_point`), and
its copies sealed when it is made (:func:`seal_fork`).

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

__all__ = ["fork_point", "seal_fork"]

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


def seal_fork(conn: Any, goal: str, run_id: str) -> None:
    """Inside the transaction that made fork ``run_id``: with ``LETITLOOP_SEAL_KEY`` set, its
    copied rows sealed as the new run's chain (``postgres_seals.start`` adopts them), as
    ``lil fork`` seals a journal file's (``sqlite_changes.bind_copied_rows``); nothing
    without the key (the first journal that opens it with one seals them then)."""
    secret = env_seal_key()
    if secret is not None:
        start(conn, goal, run_id, secret)
