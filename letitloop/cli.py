"""The ``lil`` command line: one click group, a thin layer over the library.

Every error a user can cause is one line (``click.ClickException``), never a
traceback.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from .errors import LetItLoopError


class LilGroup(click.Group):
    """A click group that turns LetItLoopError into one clear line and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LetItLoopError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=LilGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="letitloop", prog_name="lil")
def cli() -> None:
    """letitloop: durable steps in one local SQLite file.

    \b
    Example:
      lil demo            # watch a run get SIGKILLed and resume
    """


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the demo's journal folder and print its path.")
def demo(keep: bool) -> None:
    """Run a five-step workflow, SIGKILL it in step 3, and resume it.

    \b
    Example:
      lil demo
    """
    from .demo import run_demo

    sys.exit(run_demo(keep=keep))


def _max_restarts(ctx: click.Context, param: click.Parameter, value: str) -> int | None:
    """A whole number >= 0, or ``unlimited`` (None)."""
    if value.strip().lower() in ("unlimited", "none", "inf"):
        return None
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise click.BadParameter(f"expected a whole number >= 0 or 'unlimited', got {value!r}")
    return n


def _exit_statuses(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> frozenset[int]:
    """Exit statuses 0-255 or signal names (``SIGKILL`` means 137)."""
    from .supervisor import parse_exit_status

    try:
        return frozenset(parse_exit_status(v) for v in values)
    except LetItLoopError as exc:
        raise click.BadParameter(str(exc)) from None


_SECONDS = click.FloatRange(min=0)


@cli.command(
    context_settings={"ignore_unknown_options": True},
)
@click.option("-m", "module", metavar="MODULE", help="Run a module (python -m MODULE).")
@click.option(
    "--max-restarts",
    metavar="N|unlimited",
    default="10",
    callback=_max_restarts,
    show_default=True,
    help="Restarts allowed since the last stable run ('unlimited' for no limit).",
)
@click.option(
    "--backoff",
    type=_SECONDS,
    default=1.0,
    show_default=True,
    help="Seconds before the first restart.",
)
@click.option(
    "--backoff-factor",
    type=click.FloatRange(min=1),
    default=2.0,
    show_default=True,
    help="Each further restart waits this many times longer.",
)
@click.option(
    "--backoff-max", type=_SECONDS, default=60.0, show_default=True, help="Longest wait (seconds)."
)
@click.option(
    "--stable-after",
    type=_SECONDS,
    default=30.0,
    show_default=True,
    help="A child up this long resets the backoff and the restart count.",
)
@click.option(
    "--burst",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Breaker: more than N deaths within --window stops the loop.",
)
@click.option(
    "--window", type=_SECONDS, default=10.0, show_default=True, help="Breaker window (seconds)."
)
@click.option(
    "--restart",
    type=click.Choice(["on-failure", "on-crash", "always"]),
    default="on-failure",
    show_default=True,
    help="Restart on any failure, only on a death by signal, or on every exit.",
)
@click.option(
    "--no-restart-on",
    metavar="CODE",
    multiple=True,
    callback=_exit_statuses,
    help="Never restart after this exit status (or signal name); repeatable.",
)
@click.option(
    "--grace",
    type=_SECONDS,
    default=10.0,
    show_default=True,
    help="Seconds the child gets after SIGINT/SIGTERM before SIGKILL.",
)
@click.option(
    "--jitter",
    type=click.FloatRange(min=0, max=1),
    default=0.0,
    show_default=True,
    help="Random spread of each delay, as a fraction (0.1 = ±10%).",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="Journal file for the records (default: $LETITLOOP_DB, else .letitloop/journal.db).",
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="SCRIPT [ARGS]...")
def watch(
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
    from .supervisor import Policy, module_argv, script_argv
    from .supervisor import watch as run_watch

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
    sys.exit(run_watch(argv, target=target, policy=policy, db=db))


def main() -> None:
    """The ``lil`` console script."""
    cli(prog_name="lil")
