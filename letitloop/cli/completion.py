"""Shell completion for ``lil``: goals, runs and step keys, read from the journal.

Read-only and forgiving: without a usable journal, nothing is offered and
nothing fails.
"""

from __future__ import annotations

from typing import Any

import click

from .params import db_path


def _completion_rows(ctx: click.Context, sql: str, params: tuple[Any, ...]) -> list[Any]:
    """Rows of a read-only query on the journal; nothing when there is no usable journal."""
    import sqlite3

    from ..files import resolve_path

    try:
        path = resolve_path(db_path(ctx))
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()
    except Exception:  # completion never fails the shell: no journal, no words
        return []


def _like(incomplete: str) -> str:
    return incomplete.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def complete_goals(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    rows = _completion_rows(
        ctx,
        "SELECT goal FROM goals WHERE goal LIKE ? ESCAPE '\\' ORDER BY goal LIMIT 200",
        (_like(incomplete),),
    )
    return [click.shell_completion.CompletionItem(g, help="goal") for (g,) in rows]


def complete_runs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Goals, then run ids (newest first) and run names that start with what was typed."""
    item = click.shell_completion.CompletionItem
    found = complete_goals(ctx, param, incomplete)
    for rid, goal, name, status in _completion_rows(
        ctx,
        "SELECT id, goal, name, status FROM runs WHERE id LIKE ? ESCAPE '\\' OR name LIKE ? "
        "ESCAPE '\\' ORDER BY rowid DESC LIMIT 200",
        (_like(incomplete.upper()), _like(incomplete)),
    ):
        word = rid if rid.startswith(incomplete.upper()) else name
        found.append(item(word, help=f"run of {goal} ({status})"))
    return found


def complete_keys(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Step keys of the run named on the command line (its id, or a goal's newest run)."""
    # While an option's value is being completed, click leaves the positional
    # arguments unparsed in ctx.args.
    ref = ctx.params.get("ref") or ctx.params.get("run_ref") or next(iter(ctx.args), None)
    if not ref:
        return []
    runs = _completion_rows(
        ctx,
        "SELECT r.id, g.journal_table FROM runs r JOIN goals g ON g.goal = r.goal "
        "WHERE r.id = ? OR r.goal = ? OR r.name = ? OR r.id LIKE ? ESCAPE '\\' "
        "ORDER BY r.id = ? DESC, r.id DESC LIMIT 1",
        (ref, ref, ref, _like(str(ref).upper()), ref),
    )
    if not runs:
        return []
    run_id, table = runs[0]
    rows = _completion_rows(
        ctx,
        f"SELECT key FROM \"{table}\" WHERE run = ? AND key LIKE ? ESCAPE '\\' ORDER BY rowid",
        (run_id, _like(incomplete)),
    )
    return [click.shell_completion.CompletionItem(k) for (k,) in rows]
