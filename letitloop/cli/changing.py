"""The commands that change a journal from outside a run: ``lil reset/fork/gc/upgrade/copy``.

The work is in :mod:`letitloop.maintenance` (and :mod:`letitloop.stores.sqlite.migrate`),
the words in :mod:`letitloop.runtext.changes`. A command that deletes asks
first on a terminal, and wants ``--yes`` elsewhere.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from .completion import complete_keys, complete_runs
from .params import STATE_CHOICE, Duration, db_option, json_flags, open_journal


def confirm(question: str, refusal: str, yes: bool) -> None:
    """Ask on a terminal; off one (a script, a pipe) require --yes: the same rule everywhere."""
    from ..runtext.render import safe

    if yes:
        return
    if not sys.stdin.isatty():
        raise click.ClickException(safe(refusal + "; pass --yes to confirm when not at a terminal"))
    click.confirm(safe(question), abort=True)


@click.command()
@click.argument("ref", metavar="RUN|GOAL", shell_complete=complete_runs)
@click.option(
    "--run",
    "run_ref",
    metavar="RUN",
    help="With a GOAL: the run of it to forget (id, id prefix or name); "
    "default: the run Journal(GOAL) would resume.",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--dry-run", is_flag=True, help="Say which run would be forgotten; change nothing.")
@db_option
@click.pass_context
def reset(ctx: click.Context, ref: str, run_ref: str | None, yes: bool, dry_run: bool) -> None:
    """Forget a run's journal so the next open starts it fresh.

    Deletes the run, its attempts, steps and run-scoped markers. RUN is a
    run id, a unique prefix of one or a run name; a GOAL means the run that
    Journal(GOAL) would resume (its newest unfinished run that is unnamed and
    was opened without arguments or input=; a @durable call's run is reset by
    its id), or with --run that run of the goal. Asks first on a terminal;
    elsewhere --yes is required. Refuses a run held by a live process.
    A work queue's run is forgotten and its entry put back in its queue: a
    worker runs it again from its first step. An entry no worker started
    yet has nothing to reset: lil reset says so (lil cancel drops it).

    \b
    Examples:
      lil reset customer_sync
      lil reset 01JD7X3K9Q --yes
      lil reset customer_sync --run 2026-11-30 --dry-run
    """
    from ..inspection import resumable_run
    from ..inspection.queue_listing import queue_entries
    from ..maintenance import reset_run, reset_target
    from ..runtext import render
    from ..runtext.changes import reset_line, reset_target_text

    journal = open_journal(ctx, write=True)
    try:
        target = reset_target(journal, ref, run_ref)
        what = reset_target_text(target)
        if dry_run:
            render.echo(f"would forget {what}")
            return
        confirm(f"Forget {what}?", f"reset would forget {what}", yes)
        gone = reset_run(journal, target.id)
        nxt = resumable_run(journal, gone.goal)
        entry = queue_entries(journal, run_names=[gone.name]) if gone.name else []
        back = next((e for e in entry if e.run_id is None), None)
    finally:
        journal.close()
    render.echo(reset_line(gone, nxt, back))


@click.command()
@click.argument("run_ref", metavar="RUN", shell_complete=complete_runs)
@click.option(
    "--from-step",
    "from_step",
    required=True,
    metavar="KEY",
    shell_complete=complete_keys,
    help="The first step to run again; the steps before it keep their results.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@db_option
@click.pass_context
def fork(ctx: click.Context, run_ref: str, from_step: str, as_json: bool) -> None:
    """Re-run RUN from step KEY on, keeping the results before KEY.

    The way out after a bug fix or a code change under a recorded run. The
    fork becomes the goal's newest unfinished run, so the next Journal(GOAL)
    (or @durable call with the same arguments: the fork keeps the input)
    resumes it; a named run's fork takes over its name (the source is
    renamed NAME@RUN_ID). The fork records where it came from: lil show
    says "forked from RUN at step KEY".

    \b
    Example:
      lil fork 01JD7X3K9QF4ZC2M8N6P0RTVWY --from-step summarize
    """
    from ..maintenance import fork_run
    from ..runtext import render
    from ..runtext.changes import fork_lines, fork_record

    journal = open_journal(ctx, write=True)
    try:
        result = fork_run(journal, run_ref, from_step)
    finally:
        journal.close()
    if as_json:
        render.echo_json(fork_record(result))
        return
    render.echo(fork_lines(result, from_step))


@click.command()
@click.option(
    "--older-than",
    "older_than",
    type=Duration(),
    required=True,
    help="Remove runs idle for longer than this (30d, 12h, 2w).",
)
@click.option(
    "--status",
    type=STATE_CHOICE,
    multiple=True,
    help="Only runs in this state (repeatable); default: every state but running.",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--dry-run", is_flag=True, help="Print what would be removed; change nothing.")
@json_flags
@db_option
@click.pass_context
def gc(
    ctx: click.Context,
    older_than: Any,
    status: tuple[str, ...],
    yes: bool,
    dry_run: bool,
    as_json: bool,
    as_jsonl: bool,
) -> None:
    """Delete old runs and their rows, and goals left empty, then reclaim the space.

    A run is old when its last activity is older than --older-than. Runs
    held by a live process are never removed. A goal left with no run (and
    no goal-scoped marker) goes too, with its journal table. A work queue's
    run goes with its entry once that ended; one whose entry is still queued
    or claimed stays (a worker runs it), and an entry cancelled before it
    started goes when it is as old. Asks first on a terminal; elsewhere
    --yes is required (--dry-run only lists).

    \b
    Examples:
      lil gc --older-than 30d --dry-run
      lil gc --older-than 30d --status completed --yes
    """
    from ..maintenance import gc_runs
    from ..runtext import render
    from ..runtext.changes import gc_lines, gc_records, gc_target_text

    journal = open_journal(ctx, write=True)
    try:
        result = gc_runs(journal, older_than, status=status or None, dry_run=True)
        if not dry_run and (result.removed or result.goals_removed or result.queue_entries_removed):
            what = gc_target_text(result)
            confirm(f"Remove {what}?", f"gc would remove {what}", yes)
        if not dry_run:
            result = gc_runs(journal, older_than, status=status or None)
    finally:
        journal.close()
    if as_jsonl:
        render.echo_jsonl(gc_records(result))
        return
    if as_json:
        render.echo_json(result.as_dict())
        return
    render.echo(gc_lines(result, dry_run))


@click.command()
@db_option
@click.pass_context
def upgrade(ctx: click.Context) -> None:
    """Upgrade a journal written by an older letitloop to this version's schema.

    Applies the pending numbered migrations, each in its own transaction with
    its record (any Journal of this version does the same when it opens the
    file). The reading commands (runs, show, export) never write, so they ask
    for this first on an older file. A file from a newer letitloop, or one
    that is not a journal, is refused and left as it was.

    \b
    Examples:
      lil upgrade
      lil upgrade --db /data/pipeline/journal.db
    """
    from ..runtext import render
    from ..stores.sqlite.migration_files import known_names

    journal = open_journal(ctx, write=True)
    try:
        render.echo(f"{journal.path}: schema at {known_names()[-1]}")
    finally:
        journal.close()


@click.command("copy")
@click.argument("source", metavar="FROM")
@click.argument("target", metavar="TO")
@click.option("--goal", metavar="GOAL", help="Copy only this goal's runs.")
@click.option(
    "--only",
    type=click.Choice(["finished", "unfinished"]),
    help="Copy only the finished runs (completed or cancelled), or only the unfinished ones "
    "(crashed, failed, waiting); default: all.",
)
@click.option(
    "--skip-existing",
    is_flag=True,
    help="Leave the runs TO has already (same id, or same name in the goal) as they are, and "
    "copy the others; without it such a run refuses the copy.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def copy_command(
    source: str,
    target: str,
    goal: str | None,
    only: str | None,
    skip_existing: bool,
    as_json: bool,
) -> None:
    """Copy runs from one journal to another: a file to PostgreSQL, or to another file.

    FROM and TO are each a journal file's path or a postgresql:// URL. Each
    run goes with everything it owns: its steps, markers, sleeps and waits,
    input and result, attempts, failed tries, usage, replays, paid calls'
    reservations, streams' chunks and sealed chain (lil watch's restart records and LangGraph's
    checkpoints stay behind). TO is made if it is a file that does not exist. Runs are
    copied oldest first, in batches of 200 runs or 50,000 rows, each batch
    one transaction; each copied run is then read back from TO as lil
    verify reads it (with LETITLOOP_SEAL_KEY set, its chain is checked with
    the key), so 'lil verify --all --db TO' passes where it passed on FROM.
    A run TO has already refuses the copy (nothing written) unless
    --skip-existing; a run a live process holds in FROM refuses it too:
    copy once it ends. FROM is only read (each run held by its lock while it
    is read). A copied unfinished run resumes from TO (Journal(goal,
    path=TO)) without calling its finished steps again. docs/postgres.md:
    "Moving runs from a file to PostgreSQL".

    \b
    Examples:
      lil copy .letitloop/journal.db postgresql://app@db.internal/jobs
      lil copy jobs.db archive.db --only finished --skip-existing
      lil copy jobs.db postgresql://app@db/jobs --goal nightly --json
    """
    from ..maintenance import copy_runs, open_ends
    from ..runtext import render
    from ..runtext.changes import copy_lines, copy_record

    reader, writer = open_ends(source, target)
    try:
        result = copy_runs(reader, writer, goal=goal, only=only, skip_existing=skip_existing)
    finally:
        reader.close()
        writer.close()
    if as_json:
        render.echo_json(copy_record(result))
        return
    render.echo(copy_lines(result))
