"""The commands that run a program: ``lil watch`` (restart it until it exits 0) and ``lil demo``.

The loop is in :mod:`letitloop.supervision.supervisor`, its settings and their defaults
in :mod:`letitloop.supervision.policy`; ``lil demo``'s workflow in
:mod:`letitloop.supervision.demo`.
"""

from __future__ import annotations

import os
import sys

import click

from ..supervision.policy import DEFAULTS, RESTART_MODES
from .params import SECONDS, exit_statuses, max_restarts


@click.command()
@click.option("--keep", is_flag=True, help="Keep the demo's journal folder and print its path.")
def demo(keep: bool) -> None:
    """Run a five-step workflow, SIGKILL it in step 3, and resume it.

    \b
    Example:
      lil demo
    """
    from ..supervision.demo import run_demo

    sys.exit(run_demo(keep=keep))


@click.command(
    context_settings={"ignore_unknown_options": True},
)
@click.option("-m", "module", metavar="MODULE", help="Run a module (python -m MODULE).")
@click.option(
    "--max-restarts",
    metavar="N|unlimited",
    default=str(DEFAULTS.max_restarts),
    callback=max_restarts,
    show_default=True,
    help="Restarts allowed since the last stable run ('unlimited' for no limit).",
)
@click.option(
    "--backoff",
    type=SECONDS,
    default=DEFAULTS.backoff,
    show_default=True,
    help="Seconds before the first restart.",
)
@click.option(
    "--backoff-factor",
    type=click.FloatRange(min=1),
    default=DEFAULTS.backoff_factor,
    show_default=True,
    help="Each further restart waits this many times longer.",
)
@click.option(
    "--backoff-max",
    type=SECONDS,
    default=DEFAULTS.backoff_max,
    show_default=True,
    help="Longest wait (seconds).",
)
@click.option(
    "--stable-after",
    type=SECONDS,
    default=DEFAULTS.stable_after,
    show_default=True,
    help="A child up this long resets the backoff and the restart count.",
)
@click.option(
    "--burst",
    type=click.IntRange(min=1),
    default=DEFAULTS.burst,
    show_default=True,
    help="Breaker: more than N deaths within --window stops the loop.",
)
@click.option(
    "--window",
    type=SECONDS,
    default=DEFAULTS.window,
    show_default=True,
    help="Breaker window (seconds).",
)
@click.option(
    "--restart",
    type=click.Choice(RESTART_MODES),
    default=DEFAULTS.restart,
    show_default=True,
    help="Restart on any failure, only on a death by signal, or on every exit.",
)
@click.option(
    "--no-restart-on",
    metavar="CODE",
    multiple=True,
    callback=exit_statuses,
    help="Never restart after this exit status (or signal name); repeatable.",
)
@click.option(
    "--grace",
    type=SECONDS,
    default=DEFAULTS.grace,
    show_default=True,
    help="Seconds the child gets after SIGINT/SIGTERM before SIGKILL.",
)
@click.option(
    "--jitter",
    type=click.FloatRange(min=0, max=1),
    default=DEFAULTS.jitter,
    show_default=True,
    help="Random spread of each delay, as a fraction (0.1 = ±10%).",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help=(
        "Journal file for the records (default: $LETITLOOP_DB, else the file SCRIPT "
        "finds run by itself: the nearest .letitloop/journal.db here or above, else at "
        "its folder or above, else a new one beside it)."
    ),
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="SCRIPT [ARGS]...")
@click.pass_context
def watch(
    ctx: click.Context,
    module: str | None,
    max_restarts: int | None,
    backoff: float,
    backoff_factor: float,
    backoff_max: float,
    stable_after: float,
    burst: int,
    window: float,
    restart: str,
    no_restart_on: frozenset[int],
    grace: float,
    jitter: float,
    db: str | None,
    args: tuple[str, ...],
) -> None:
    """Run a script in a child interpreter and restart it until it exits 0.

    A non-zero exit or a death by a signal (SIGKILL, OOM, SIGSEGV) restarts
    it after an exponential backoff; a crash loop trips the breaker; SIGINT
    or SIGTERM stops the child (grace, then SIGKILL) and the loop. lil exits
    with the child's final status. Arguments after SCRIPT (or after --) go
    to the script. Each start, exit and restart is recorded in the journal.

    \b
    Examples:
      lil watch agent_pipeline.py --max-restarts 10 --backoff 1.0
      lil watch --no-restart-on 2 -m mypackage.pipeline -- --date 2026-11-30
    """
    from ..supervision.policy import Policy
    from ..supervision.relaunch import module_argv, script_argv
    from ..supervision.supervisor import watch as run_watch

    if module is not None:
        argv = module_argv(module, args)
        target = module
    elif args:
        argv = script_argv(args[0], args[1:])
        target = args[0]
    else:
        raise click.UsageError("expected a SCRIPT or -m MODULE to watch; see lil watch --help")
    policy = Policy(
        max_restarts=max_restarts,
        backoff=backoff,
        backoff_factor=backoff_factor,
        backoff_max=backoff_max,
        stable_after=stable_after,
        burst=burst,
        window=window,
        restart=restart,  # type: ignore[arg-type]
        no_restart_on=no_restart_on,
        grace=grace,
        jitter=jitter,
    )
    if db is None and ctx.obj and ctx.obj.get("db") is not None:
        db = str(ctx.obj["db"])  # lil --db PATH watch …
    if db is None and module is None and not os.environ.get("LETITLOOP_DB"):
        from ..stores.discovery import default_path

        db = default_path(script=args[0])  # the journal the script finds run by itself
    sys.exit(run_watch(argv, target=target, policy=policy, db=db))
