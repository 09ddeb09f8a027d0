"""``lil schedules``: list the schedules of a journal; ``lil schedules run``: run them.

The loop is :mod:`letitloop.scheduling.scheduler`, the schedules' arithmetic
:mod:`letitloop.scheduling.schedules`, the words :mod:`letitloop.runtext.schedules`.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import click

from .params import SECONDS, db_option, db_path, json_flags, open_journal


@click.group(invoke_without_command=True)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Ticks shown per schedule, newest first.",
)
@click.option("--all", "show_all", is_flag=True, help="Show every tick.")
@json_flags
@db_option
@click.pass_context
def schedules(
    ctx: click.Context, limit: int, show_all: bool, as_json: bool, as_jsonl: bool
) -> None:
    """List each schedule, its last and next tick, and the runs its ticks started.

    Reads the journal only (never writes or upgrades it).

    \b
    Examples:
      lil schedules
      lil schedules --all --json
      lil schedules run app.jobs        # start the schedules of a module
    """
    if ctx.invoked_subcommand is not None:
        return
    from ..runtext import render
    from ..runtext.schedules import schedule_lines, schedule_records

    journal = open_journal(ctx)
    try:
        rows, ticks = journal.schedule_rows()
    finally:
        journal.close()
    records = schedule_records(rows, ticks, time.time(), None if show_all else limit)
    if as_json or as_jsonl:
        render.echo_jsonl(records) if as_jsonl else render.echo_json(records)
    else:
        render.echo(schedule_lines(records))


@schedules.command("run")
@click.argument("target", metavar="MODULE")
@click.option(
    "--poll",
    type=SECONDS,
    default=1.0,
    show_default=True,
    help="Seconds between two looks at the clock.",
)
@db_option
@click.pass_context
def run_command(ctx: click.Context, target: str, poll: float) -> None:
    """Run the schedules of MODULE until stopped (SIGINT, SIGTERM): start each tick's run once.

    Imports MODULE (a dotted module from the current folder, or a .py file)
    and runs every @schedule function and Schedule in it, in this process,
    each tick's run in a thread. Start as many as you like, on one journal
    file or on many hosts against one PostgreSQL: each tick's run starts once,
    and a tick whose run was killed is resumed. Run it under lil watch to
    restart it when it dies. One line per tick on stderr.

    \b
    Examples:
      lil schedules run app.jobs
      lil --db postgresql://db/jobs schedules run jobs.py
      lil watch -m letitloop schedules run app.jobs
    """
    from ..deploycheck.target import load_target
    from ..errors import LetItLoopError
    from ..scheduling.scheduler import run_schedules
    from ..scheduling.schedules import schedules_of

    module, _, failed = load_target(target)
    if failed is not None:
        raise LetItLoopError(f"importing {target} failed: {failed}")
    if not schedules_of(module):
        raise LetItLoopError(
            f"{target} holds no schedule: decorate a @durable function with "
            f"@schedule('*/15 * * * *') or make a Schedule(...) at module level"
        )
    stop = threading.Event()

    def stopping(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, stopping)
    signal.signal(signal.SIGINT, stopping)
    path = db_path(ctx)
    run_schedules(module, path=None if path is None else str(path), poll=poll, stop=stop)
