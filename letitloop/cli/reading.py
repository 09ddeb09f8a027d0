"""The commands that read a journal and never write it: ``lil runs``, ``show`` and ``export``.

The work is in :mod:`letitloop.inspection`, the words in
:mod:`letitloop.runtext`, the text's safety in :mod:`letitloop.runtext.render`.
``lil show --follow`` is here too: it reads the run again until it ends.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

import click

from ..errors import RunNotFoundError
from .completion import complete_goals, complete_keys, complete_runs
from .following import follow_run
from .params import STATE_CHOICE, Since, db_option, json_flags, key_values, open_journal

#: ``lil runs --status``: a run's states, and a queue's entry's that has no run yet.
RUNS_STATE_CHOICE = click.Choice([*STATE_CHOICE.choices, "queued", "delayed"])


@click.command()
@click.argument("goal", required=False, shell_complete=complete_goals)
@click.option(
    "--status", type=RUNS_STATE_CHOICE, multiple=True, help="Only runs in this state (repeatable)."
)
@click.option(
    "--queue",
    "queue_name",
    metavar="NAME",
    help="Only the runs and waiting entries of this work queue (docs/queues.md).",
)
@click.option(
    "--since",
    type=Since(),
    help="Only runs started since: a duration ago (2h, 7d) or a date/time.",
)
@click.option(
    "--until",
    type=Since(),
    help="Only runs started before: a duration ago (2h, 7d) or a date/time.",
)
@click.option(
    "--name",
    "name_glob",
    metavar="GLOB",
    help="Only runs whose name matches this glob (user-*, 2026-11-?); case-sensitive.",
)
@click.option(
    "--input",
    "inputs",
    metavar="KEY=VALUE",
    multiple=True,
    callback=key_values,
    help="Only runs whose recorded input has VALUE (JSON, else text) at KEY; repeatable.",
)
@click.option(
    "--version",
    "code_version",
    metavar="VERSION",
    help="Only runs whose latest attempt ran this version of the code (or one starting so).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=0, max=1_000_000_000),
    default=50,
    show_default=True,
    help="At most this many runs, newest first (0: all).",
)
@click.option(
    "--offset",
    type=click.IntRange(min=0, max=1_000_000_000),
    default=0,
    help="Skip this many matching runs first (the next page).",
)
@json_flags
@db_option
@click.pass_context
def runs(
    ctx: click.Context,
    goal: str | None,
    status: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    name_glob: str | None,
    inputs: list[tuple[str, str]],
    code_version: str | None,
    limit: int,
    offset: int,
    as_json: bool,
    as_jsonl: bool,
    queue_name: str | None = None,
) -> None:
    """List runs, newest first: state, name, steps done, cost, what each is doing.

    A run whose process died without finishing shows as "crashed", with the
    step it died in; one held by a live process as "running", with the step
    it has been in for more than a second (or its sleep, wait or retry); a
    fork nobody opened yet as "pending"; a run that stopped to wait for
    outside input as "waiting"; a cancelled one as "cancelled". COST sums
    what its steps reported (letitloop.usage). VERSION is the version of
    the code the run's latest attempt ran (docs/versioning.md). A work queue's
    entry that no worker started yet is listed too, under its entry id, as
    "queued" (or "delayed": not due yet; "cancelled": cancelled before it
    started); each queue's run says its queue, priority and entry on the line
    under it, and --queue NAME lists one queue's. Off a terminal every value is
    printed whole. When more runs match than --limit, the output says so (on
    stderr with --json/--jsonl). The last line names the journal file read:
    with no --db or $LETITLOOP_DB, the nearest .letitloop/journal.db here or
    in a folder above.

    \b
    Examples:
      lil runs
      lil runs customer_sync --status failed --status crashed --since 1d
      lil runs --name 'user-*' --input user_id=7
      lil runs --status crashed --version 41c0
      lil runs --jsonl --limit 0 | jq -r 'select(.state == "crashed") | .id'
      lil runs --queue emails --status queued --status delayed
    """
    from ..inspection.queue_listing import list_runs_and_entries
    from ..runtext import render
    from ..runtext.runs import journal_line, more_text, no_runs_line, runs_lines

    journal = open_journal(ctx)
    try:
        found = list_runs_and_entries(
            journal,
            goal,
            status=status or None,
            since=since,
            until=until,
            name=name_glob,
            inputs=inputs,
            limit=limit + 1 if limit else None,
            offset=offset,
            version=code_version,
            queue=queue_name,
        )
    finally:
        journal.close()
    more = None
    if limit and len(found) > limit:
        found = found[:limit]
        more = more_text(len(found), offset, limit)
    if as_json or as_jsonl:
        records = [r.as_dict() for r in found]
        render.echo_jsonl(records) if as_jsonl else render.echo_json(records)
        if more:
            render.echo(more, err=True)
        return
    if not found:
        render.echo(no_runs_line(goal, journal.path))
        return
    render.echo([*runs_lines(found, more), journal_line(journal.path)])


@click.command()
@click.argument("ref", metavar="RUN|GOAL", shell_complete=complete_runs)
@click.option("--full", is_flag=True, help="Print the input, result and every step's in full.")
@click.option(
    "--step",
    "step_key",
    metavar="KEY",
    shell_complete=complete_keys,
    help="Only this step: its full result, error and traceback.",
)
@click.option(
    "--follow",
    is_flag=True,
    help="Keep watching while the run progresses; stops when it completes (exit 0), "
    "fails, is cancelled, stops to wait for outside input, or is crashed with nothing to "
    "resume it (1).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05, max=3600),
    default=1.0,
    show_default=True,
    help="Seconds between refreshes with --follow.",
)
@json_flags
@db_option
@click.pass_context
def show(
    ctx: click.Context,
    ref: str,
    full: bool,
    step_key: str | None,
    follow: bool,
    interval: float,
    as_json: bool,
    as_jsonl: bool,
) -> None:
    """Show one run: its input, steps, result, errors, attempts and restarts.

    RUN is a run id (or a unique prefix of one, or a run name: its newest
    generation, as an opener of the name gets it; NAME~2 names one); GOAL
    means the goal's newest run. Each row has its status, attempt, duration and a
    one-line preview of its result; a step running for more than a second
    shows as running, and one its attempt left unfinished as interrupted.
    Each attempt says how it ended (and which `lil watch` started it).
    A run of a work queue's entry says its queue on its second line; an
    entry no worker started yet (its id or run name) shows as the entry:
    its queue, state, priority and when it is due.
    --json and --jsonl give what `lil export` gives: decoded results.

    \b
    Examples:
      lil show customer_sync
      lil show 01JD7X3K9Q --step fetch_user
      lil show customer_sync --follow
    """
    from dataclasses import replace

    from ..inspection import export_records, export_run, find_run, show_run
    from ..inspection.queue_listing import queue_entries, with_entry
    from ..runtext import render
    from ..runtext.detail import show_lines, step_lines, step_record
    from ..runtext.queues import entry_line, entry_lines

    journal = open_journal(ctx, live=follow)
    try:
        try:
            run = find_run(journal, ref)
        except RunNotFoundError:
            entry = queued_entry(journal, ref)  # a queue's entry no worker started yet
            if as_json or as_jsonl:
                record = entry.as_dict()
                render.echo_jsonl([record]) if as_jsonl else render.echo_json(record)
            else:
                render.echo(entry_lines(entry))
            return
        if follow:
            sys.exit(follow_run(journal, ref, run, interval, as_json or as_jsonl))
        detail = show_run(journal, run)
        if step_key is not None and (as_json or as_jsonl):
            step = step_record(detail, step_key)
            render.echo_jsonl([step]) if as_jsonl else render.echo_json(step)
        elif as_jsonl:
            render.echo_jsonl(export_records(journal, detail))
        elif as_json:
            render.echo_json(export_run(journal, detail))
        elif step_key is not None:
            render.echo(step_lines(detail, step_key))
        else:
            entries = queue_entries(journal, run_ids=[run.id])[:1]
            if entries:  # a run given back to its queue is told in its entry's state
                detail = replace(detail, run=with_entry(detail.run, entries[0]))
            lines = show_lines(detail, full)
            for entry in entries:
                lines.insert(1, entry_line(entry))
            render.echo(lines)
    finally:
        journal.close()


def queued_entry(journal: Any, ref: str) -> Any:
    """The queue entry ``ref`` names when no run is (RunNotFoundError, the run's words, when
    no entry is either)."""
    from ..inspection import find_run
    from ..inspection.queue_listing import find_entry

    try:
        return find_entry(journal, ref)
    except RunNotFoundError:
        find_run(journal, ref)  # the error a run's reference gets
        raise


@click.command()
@click.argument("ref", metavar="RUN|GOAL", shell_complete=complete_runs)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "ndjson", "jsonl", "html"]),
    default="json",
    show_default=True,
    help="One JSON document, or one JSON record per line (ndjson and jsonl are the same), "
    "or the run's web page as one self-contained HTML file (needs letitloop[ui]).",
)
@click.option("--jsonl", "as_jsonl", is_flag=True, help="The same as --format jsonl.")
@click.option(
    "--redact",
    "redact",
    multiple=True,
    metavar="KEY",
    help="Replace the value of this dict key, at any depth of the input, the result and "
    'every row\'s result, by "[redacted]" (repeatable; json and jsonl only).',
)
@db_option
@click.pass_context
def export(ctx: click.Context, ref: str, fmt: str, as_jsonl: bool, redact: tuple[str, ...]) -> None:
    """Print a run with its input, steps, markers and decoded results as JSON.

    For bug reports and tests. Timestamps are ISO-8601 UTC; each row has its
    decoded "result", the stored JSON text as "result_json", and
    "result_error": null, or why a damaged stored text could not be decoded.
    The run has its decoded "input" and "result" the same way.
    The output is strict JSON: an int too long for decimal text is written
    {"!int": "0x…"} and nan or infinity {"!float": "nan"}, as in the journal.
    --format jsonl (or ndjson) gives the same document as one record per
    line, nothing left out: the "run", then a "row", "try", "attempt",
    "supervisor_event" and "reservation" per item, then the run's "usage" totals.
    --format html gives the run's `lil ui` page as one file to attach to a
    bug report: styles inline, no script, every value whole.
    --redact KEY replaces that key's values before anything is printed.

    \b
    Examples:
      lil export 01JD7X3K9QF4ZC2M8N6P0RTVWY > run.json
      lil export customer_sync --jsonl | jq -c 'select(.record == "row")'
      lil export customer_sync --format html > run.html
      lil export customer_sync --redact api_key --redact password > run.json
    """
    from ..inspection import export_records, export_run, find_run
    from ..runtext import render

    if redact and fmt == "html" and not as_jsonl:
        raise click.UsageError(
            "--redact works with --format json or jsonl, not html; export the run as JSON "
            "to redact it"
        )
    if fmt == "html":
        from .ui import ui_modules

        ui_modules()
    journal = open_journal(ctx)
    try:
        run = find_run(journal, ref)
        if fmt == "html" and not as_jsonl:
            from ..web.pages import standalone_run

            click.echo(render.safe(standalone_run(journal, run), block=True))
        elif fmt == "json" and not as_jsonl:
            render.echo_json(export_run(journal, run, redact=redact))
        else:
            render.echo_jsonl(export_records(journal, run, redact=redact))
    finally:
        journal.close()
