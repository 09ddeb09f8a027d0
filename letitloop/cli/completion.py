"""Shell completion for ``lil``: goals, runs and step keys, read from the journal.

Read-only and forgiving: without a usable journal, nothing is offered and
nothing fails. Read through the journal's inspector, as every command reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from .params import db_path

if TYPE_CHECKING:
    from ..inspection import Inspector

T = TypeVar("T")

#: The most words offered for one completion.
MAX_WORDS = 200


def _completion_words(ctx: click.Context, read: Callable[[Inspector], list[T]]) -> list[T]:
    """What ``read`` finds in the journal, read-only; nothing when there is no usable journal."""
    try:
        from ..inspection import open_inspector

        journal = open_inspector(db_path(ctx), separate_process=True)
        try:
            return read(journal)
        finally:
            journal.close()
    except Exception:  # completion never fails the shell: no journal, no words
        return []


def complete_goals(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    goals = _completion_words(ctx, lambda j: j.goal_names(incomplete, MAX_WORDS))
    return [click.shell_completion.CompletionItem(g, help="goal") for g in goals]


def complete_runs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Goals, then run ids (newest first) and run names that start with what was typed."""
    item = click.shell_completion.CompletionItem
    found = complete_goals(ctx, param, incomplete)
    for run in _completion_words(ctx, lambda j: j.run_refs(incomplete, MAX_WORDS)):
        word = run.id if run.id.startswith(incomplete.upper()) else run.name
        found.append(item(word, help=f"run of {run.goal} ({run.status})"))
    return found


def complete_keys(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Step keys of the run named on the command line (its id, or a goal's newest run)."""
    # While an option's value is being completed, click leaves the positional
    # arguments unparsed in ctx.args.
    ref = ctx.params.get("ref") or ctx.params.get("run_ref") or next(iter(ctx.args), None)
    if not ref:
        return []
    keys = _completion_words(ctx, lambda j: j.step_keys(str(ref), incomplete))
    return [click.shell_completion.CompletionItem(k) for k in keys]
