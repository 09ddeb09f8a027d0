"""The commands that act on a run from outside it: ``lil send`` and ``lil cancel``.

The work is in :mod:`letitloop.supervision.control`; a live holder notices it on its
own. The words are in :mod:`letitloop.runtext.changes`.
"""

from __future__ import annotations

from typing import Any

import click

from .completion import complete_runs
from .params import db_option, open_journal


def json_value(text: str, where: str) -> Any:
    """``text`` parsed as JSON; a one-line error saying what JSON looks like otherwise."""
    import json

    try:
        return json.loads(text)
    except ValueError as exc:
        from ..runtext.render import clip

        # The group's error handling makes the message safe for the terminal.
        raise click.ClickException(
            f'expected {where} as JSON (true, 42, "some text" in double quotes, '
            f'{{"approved": true}}), got {clip(repr(text), 60)}: {exc}; to send text, '
            f"quote it: '\"yes\"'"
        ) from None


@click.command()
@click.argument("ref", metavar="RUN|GOAL", shell_complete=complete_runs)
@click.argument("name", metavar="NAME")
@click.argument("value", metavar="[VALUE]", required=False)
@click.option(
    "--file",
    "file",
    type=click.File("r", encoding="utf-8"),
    help="Read the value (JSON) from this file ('-' for stdin) instead of VALUE.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@db_option
@click.pass_context
def send(
    ctx: click.Context,
    ref: str,
    name: str,
    value: str | None,
    file: Any,
    as_json: bool,
) -> None:
    """Send VALUE (JSON) to a run waiting in wait_for(NAME).

    The value is written into the wait's row: the run gets it back from
    wait_for, and every later attempt replays it. A process waiting in it
    wakes within about a tenth of a second; a run that stopped to wait
    resumes when its program runs again. RUN is a run id, prefix or name; a
    GOAL means its newest run waiting for NAME. A run takes one value per
    wait, and only while it waits for that name: anything else is an error.

    \b
    Examples:
      lil send deploy approval true
      lil send 01JD7X3K9Q review '{"approved": false, "note": "fix the title"}'
      lil send deploy plan --file plan.json
    """
    from .. import codec
    from ..runtext import render
    from ..runtext.changes import sent_line, sent_record
    from ..supervision.control import send_text

    if (value is None) == (file is None):
        raise click.UsageError("expected a VALUE or --file PATH (one of them); see lil send --help")
    parsed = json_value(file.read() if file is not None else str(value), "the value")
    text = codec.encode(parsed)
    journal = open_journal(ctx, write=True)
    try:
        sent = send_text(journal, ref, name, text)
    finally:
        journal.close()
    if as_json:
        render.echo_json(sent_record(sent))
        return
    render.echo(sent_line(sent, parsed))


@click.command()
@click.argument("ref", metavar="RUN|GOAL", shell_complete=complete_runs)
@click.option("--reason", metavar="TEXT", help="Why: recorded with the cancel.")
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0, max=86400),
    default=None,
    metavar="SECONDS",
    help="Wait up to SECONDS for a live holder to stop (exit 1 if it has not).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@db_option
@click.pass_context
def cancel(
    ctx: click.Context, ref: str, reason: str | None, wait_s: float | None, as_json: bool
) -> None:
    """Cancel a run: it stops at its next step, and no opener resumes it.

    A run no process holds (crashed, failed, waiting) is cancelled at once.
    A run a live process holds is asked to stop: the process gets
    RunCancelledError at its next step, marker, sleep or wait (an async step
    in flight is interrupted where it awaits), and the run's status becomes
    cancelled. lil watch does not restart it. To run it again from a step:
    lil fork RUN --from-step KEY. RUN is a run id, prefix or name; a GOAL
    means its newest run. A work queue's entry no worker started yet (its
    id or run name) is cancelled at once: it never starts.

    \b
    Examples:
      lil cancel 01JD7X3K9Q --reason "wrong input file"
      lil cancel nightly_report --wait 30
    """
    from ..runtext import render
    from ..runtext.changes import (
        cancel_line,
        cancel_record,
        rerun_hint,
        still_held_text,
        stopped_line,
    )
    from ..supervision.control import cancel_run, wait_until_stopped

    journal = open_journal(ctx, write=True)
    try:
        done = cancel_run(journal, ref, reason=reason)
        run = done.run
        if wait_s is not None and not done.at_once:
            run = wait_until_stopped(journal, run.id, wait_s)
    finally:
        journal.close()
    if as_json:
        render.echo_json(cancel_record(done, run))
    else:
        render.echo(cancel_line(done, run))
        if wait_s is not None and not done.at_once:
            if run.state == "running":
                raise click.ClickException(render.safe(still_held_text(run, wait_s)))
            render.echo(stopped_line(run))
    waited = run.queue is not None and not run.attempts  # an entry that never started
    if not as_json and run.state in ("cancelled", "running") and not waited:
        render.echo(rerun_hint(run))
