"""The ``lil`` command line: one click group, a thin layer over the library.

Every error a user can cause is one line (``click.ClickException``), never a
traceback; an unexpected one is one line too, saying how to see its
traceback (:data:`TRACEBACK_ENV`). Recorded text is printed only through
:mod:`letitloop.render`, which makes it safe for a terminal.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from .errors import LetItLoopError
from .policy import DEFAULTS, RESTART_MODES

#: Set to 1 to get the full traceback of any error instead of its one line.
TRACEBACK_ENV = "LETITLOOP_TRACEBACK"

#: Exit status of an unexpected internal error (a bug): EX_SOFTWARE of sysexits.h.
INTERNAL_ERROR_STATUS = 70


#: What click raises for a group called without a command (click >= 8.2).
_HELP_AS_ERROR: Any = getattr(click.exceptions, "NoArgsIsHelpError", ())


class InternalError(click.ClickException):
    """An exception lil did not expect: one line, and how to see its traceback."""

    exit_code = INTERNAL_ERROR_STATUS


def _one_line(exc: BaseException) -> click.ClickException:
    """``exc`` as the one-line error lil prints, its text made safe for a terminal.

    A click error keeps its class (usage errors print the usage first); a
    LetItLoopError or an OSError is a user's situation (a missing file, a
    read-only folder); anything else is a bug in lil.
    """
    from .render import safe

    if isinstance(exc, click.ClickException):
        # click's show() prints this attribute (typed Final only for its own code).
        # `lil` alone is an "error" whose message is the help text: its lines stay.
        exc.message = safe(exc.message, block=isinstance(exc, _HELP_AS_ERROR))  # type: ignore[misc]
        return exc
    if isinstance(exc, LetItLoopError):
        return click.ClickException(safe(str(exc)))
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return click.ClickException(
            safe(
                f"{where}{exc.strerror or exc}; check that the path exists, that you may read "
                f"and write it, and that the disk has space"
            )
        )
    return InternalError(
        safe(
            f"internal error: {type(exc).__name__}: {exc} (a bug in lil, not in what you "
            f"typed: run again with {TRACEBACK_ENV}=1 to see the traceback, and report it)"
        )
    )


class LilGroup(click.Group):
    """A click group whose every error is one line and exit status 1 (70 for a bug)."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.ClickException as exc:  # a bad option of lil itself, before a command
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, KeyboardInterrupt, EOFError):
            raise  # click ends these as it should
        except OSError as exc:
            if exc.errno == errno.EPIPE or os.environ.get(TRACEBACK_ENV) == "1":
                raise  # click silences a closed pipe (lil runs | head)
            raise _one_line(exc) from None
        except Exception as exc:
            if os.environ.get(TRACEBACK_ENV) == "1" and not isinstance(exc, click.ClickException):
                raise
            raise _one_line(exc) from None


@click.group(cls=LilGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="letitloop", prog_name="lil")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The journal file (default: $LETITLOOP_DB, else .letitloop/journal.db).",
)
@click.pass_context
def cli(ctx: click.Context, db: Path | None) -> None:
    """letitloop: durable steps in one local SQLite file.

    Recorded text is printed with its control characters as visible escapes
    (\\x1b). Every error is one line; LETITLOOP_TRACEBACK=1 prints the
    traceback instead.

    \b
    Example:
      lil demo            # watch a run get SIGKILLed and resume
      lil --db jobs.db runs --status failed
    """
    ctx.ensure_object(dict)["db"] = db


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
    from .policy import parse_exit_status

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
    default=str(DEFAULTS.max_restarts),
    callback=_max_restarts,
    show_default=True,
    help="Restarts allowed since the last stable run ('unlimited' for no limit).",
)
@click.option(
    "--backoff",
    type=_SECONDS,
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
    type=_SECONDS,
    default=DEFAULTS.backoff_max,
    show_default=True,
    help="Longest wait (seconds).",
)
@click.option(
    "--stable-after",
    type=_SECONDS,
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
    type=_SECONDS,
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
    callback=_exit_statuses,
    help="Never restart after this exit status (or signal name); repeatable.",
)
@click.option(
    "--grace",
    type=_SECONDS,
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
    help="Journal file for the records (default: $LETITLOOP_DB, else .letitloop/journal.db).",
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
    from .policy import Policy
    from .supervisor import module_argv, script_argv
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
    if db is None and ctx.obj and ctx.obj.get("db") is not None:
        db = str(ctx.obj["db"])  # lil --db PATH watch …
    sys.exit(run_watch(argv, target=target, policy=policy, db=db))


# -- inspection: lil runs / show / reset / fork / gc / export -------------------------
# Thin: the work is in letitloop.inspection, the text in letitloop.render.


class _Duration(click.ParamType):  # type: ignore[type-arg]
    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from .inspection import parse_duration

        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class _Since(click.ParamType):  # type: ignore[type-arg]
    name = "WHEN"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from .inspection import parse_since

        try:
            return parse_since(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _store(ctx: click.Context) -> Any:
    from .inspection import open_journal_file

    return open_journal_file(ctx.find_root().ensure_object(dict).get("db"))


def _echo_json(data: Any) -> None:
    from .render import json_text

    click.echo(json_text(data))


_STATE_CHOICE = click.Choice(["running", "crashed", "pending", "completed", "failed"])


@cli.command()
@click.argument("goal", required=False)
@click.option(
    "--status", type=_STATE_CHOICE, multiple=True, help="Only runs in this state (repeatable)."
)
@click.option(
    "--since",
    type=_Since(),
    help="Only runs started since: a duration ago (2h, 7d) or a date/time.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1, max=1_000_000_000),
    default=50,
    show_default=True,
    help="At most this many runs, newest first.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (UTC timestamps).")
@click.pass_context
def runs(
    ctx: click.Context,
    goal: str | None,
    status: tuple[str, ...],
    since: datetime | None,
    limit: int,
    as_json: bool,
) -> None:
    """List runs, newest first, with their state and steps done.

    A run whose process died without finishing shows as "crashed"; one held
    by a live process as "running"; a fork nobody opened yet as "pending".

    \b
    Examples:
      lil runs
      lil runs customer_sync --status failed --status crashed --since 1d
      lil runs --json --limit 5
    """
    from . import render
    from .inspection import list_runs

    store = _store(ctx)
    try:
        found = list_runs(store, goal, status=status or None, since=since, limit=limit + 1)
    finally:
        store.close()
    more, found = len(found) > limit, found[:limit]
    if as_json:
        _echo_json([r.as_dict() for r in found])
        return
    if not found:
        render.echo(f"no runs{' of ' + goal if goal else ''} matching that in {store.path}")
        return
    headers = ["RUN", "GOAL", "STATE", "STEPS", "ATT", "STARTED", "TOOK"]
    rows = [
        [
            r.id,
            r.goal,
            r.state,
            str(r.steps_done),
            str(r.attempts),
            render.local_time(r.started_at, short=True),
            "-" if r.state == "pending" else render.duration(r.duration_s),
        ]
        for r in found
    ]
    tints = [[None, None, r.state, None, None, None, None] for r in found]
    lines = render.table(headers, rows, right=(3, 4, 6), flex=[(1, 6)], colours=tints)
    out = [lines[0]]
    w = render.width()
    for r, text in zip(found, lines[1:], strict=True):
        out.append(text)
        if r.error and r.state in ("failed", "crashed", "pending", "running"):
            first = r.error.split("\n")[0]
            out.append(render.colour("  └ " + render.clip(first, w - 4), "failed"))
    if more:
        out.append(f"(the {limit} newest shown; --limit N for more)")
    render.echo(out)


def _seconds(ms: Any) -> float | None:
    """A row's ``duration_ms`` in seconds; None when it is missing or not a number."""
    return ms / 1000 if isinstance(ms, (int, float)) else None


def _result_lines(text: str | None, registry: Any) -> list[str]:
    """A stored result for people: its decoded JSON, or what is wrong with a damaged one."""
    from . import render
    from .inspection import decode_result

    value, damage = decode_result(text, registry)
    if damage is not None:
        return [
            render.colour(f"damaged: {damage}", "failed"),
            f"stored text: {text}",  # shown as it is, made safe by render.echo
        ]
    return render.block(render.json_text(value))


def _show_text(detail: Any, full: bool, registry: Any = None) -> list[str]:
    """``lil show``: lines for :func:`letitloop.render.echo` (which makes them safe)."""
    from . import render

    run = detail.run
    w = render.width()
    out = []
    name = f"  (name {run.name})" if run.name else ""
    out.append(f"run       {run.id}{name}")
    out.append(f"goal      {run.goal}")
    state = render.colour(run.state, run.state)
    if run.state == "running":
        state += f" — held by pid {run.holder_pid} on {run.holder_host}"
    elif run.state == "crashed":
        state += f" — its last process (pid {run.holder_pid} on {run.holder_host}) died"
    elif run.state == "pending":
        state += " — no process has opened it yet"  # a fresh fork
    plural = "" if run.attempts == 1 else "s"
    out.append(f"state     {state}; {run.attempts} attempt{plural}")
    out.append(f"started   {render.local_time(run.started_at)}")
    if run.finished_at:
        out.append(
            f"finished  {render.local_time(run.finished_at)}  "
            f"(took {render.duration(run.duration_s)})"
        )
    else:
        out.append(
            f"last seen {render.local_time(run.updated_at)}  "
            f"({render.duration(run.duration_s)} after start)"
        )
    if detail.previous_steps:
        out.append(
            f"progress  {run.steps_done} of {detail.previous_steps} steps "
            f"(the previous completed run's count)"
        )
    else:
        out.append(f"progress  {run.steps_done} steps done")
    if run.error:
        out.append("error     " + render.colour(render.clip(run.error, w - 10), "failed"))
    out.append("")
    if detail.rows:
        headers = ["#", "KEY", "KIND", "STATUS", "ATT", "TOOK", "RESULT"]
        rows, tints = [], []
        for i, r in enumerate(detail.rows, 1):
            took = _seconds(r.duration_ms)
            preview = (
                r.error if r.status == "failed" else (r.result if r.result is not None else "-")
            )
            preview = render.one_line(preview or "-")
            rows.append(
                [
                    str(i),
                    r.key,
                    r.kind,
                    r.status,
                    str(r.attempt),
                    render.duration(took),
                    preview or "-",
                ]
            )
            tints.append(
                [None, None, None, r.status, None, None, "failed" if r.status == "failed" else None]
            )
        out.extend(
            render.table(headers, rows, right=(0, 4, 5), flex=[(6, 12), (1, 12)], colours=tints)
        )
        if any(r.attempt == 0 for r in detail.rows):
            out.append("(attempt 0: copied from the run this one was forked from)")
    else:
        out.append("no steps or markers recorded yet")
    for r in detail.rows:
        if full and r.result is not None:
            out.append("")
            out.append(f"── {r.key} ──")
            out.extend(_result_lines(r.result, registry))
        if r.status == "failed":
            out.append("")
            first = (r.error or "").split("\n")[0]
            out.append(
                render.colour(f"step {r.key!r} failed in attempt {r.attempt}: {first}", "failed")
            )
            if r.traceback:
                out.extend("  " + ln for ln in render.block(r.traceback.rstrip()))
    out.append("")
    out.append("attempts")
    if not detail.attempts:
        out.append("  none")
    for a in detail.attempts:
        watch = f"  (lil watch {a.watch_id})" if a.watch_id else ""
        out.append(
            f"  {a.attempt:>3}  {render.local_time(a.started_at)}  pid {a.pid} on {a.host}{watch}"
        )
    out.append("supervisor restarts")
    if not detail.supervisor_events:
        out.append("  none")
    for e in detail.supervisor_events:
        bits = [render.local_time(e.get("at")), str(e.get("event")), f"attempt {e.get('attempt')}"]
        if e.get("exit_code") is not None:
            bits.append(f"exit {e['exit_code']}")
        if e.get("signal"):
            bits.append(str(e["signal"]))
        if e.get("message"):
            bits.append(str(e["message"]))
        out.append("  " + render.clip("  ".join(bits), w - 2))
    return out


def _row(detail: Any, key: str) -> Any:
    row = next((r for r in detail.rows if r.key == key), None)
    if row is None:
        keys = ", ".join(r.key for r in detail.rows[:8]) or "none"
        raise click.ClickException(
            f"run {detail.run.id} recorded no step {key!r}; its keys: {keys}"
        )
    return row


def _step_json(detail: Any, key: str) -> dict[str, Any]:
    from .inspection import decode_result

    row = _row(detail, key)
    out: dict[str, Any] = {"run": detail.run.id, **row.as_dict()}
    out["result_json"] = out.pop("result")
    out["result"], out["result_error"] = decode_result(row.result)
    return out


def _step_text(detail: Any, key: str, registry: Any = None) -> list[str]:
    """``lil show --step``: lines for :func:`letitloop.render.echo` (which makes them safe)."""
    from . import render

    row = _row(detail, key)
    took = _seconds(row.duration_ms)
    out = [
        f"step      {row.key}  ({row.kind}, #{detail.rows.index(row) + 1} in run {detail.run.id})",
        f"status    {render.colour(row.status, row.status)}, attempt {row.attempt}",
        f"function  {row.fn or '-'}",
        f"started   {render.local_time(row.started_at)}",
        f"finished  {render.local_time(row.finished_at)}  (took {render.duration(took)})",
    ]
    if row.error:
        first, *rest = render.block(row.error.rstrip())
        out.append(f"error     {first}")
        out.extend(f"          {ln}" for ln in rest)
    if row.traceback:
        out.extend("  " + ln for ln in render.block(row.traceback.rstrip()))
    out.append("result")
    out.extend(_result_lines(row.result, registry))
    return out


@cli.command()
@click.argument("ref", metavar="RUN|GOAL")
@click.option("--full", is_flag=True, help="Print every result in full (decoded JSON).")
@click.option(
    "--step",
    "step_key",
    metavar="KEY",
    help="Only this step: its full result, error and traceback.",
)
@click.option(
    "--follow",
    is_flag=True,
    help="Keep watching while the run progresses; stops when it completes or fails.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05, max=3600),
    default=1.0,
    show_default=True,
    help="Seconds between refreshes with --follow.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (UTC timestamps).")
@click.pass_context
def show(
    ctx: click.Context,
    ref: str,
    full: bool,
    step_key: str | None,
    follow: bool,
    interval: float,
    as_json: bool,
) -> None:
    """Show one run: its steps in order, errors, attempts, restarts.

    RUN is a run id (or a unique prefix of one, or a run name); GOAL means
    the goal's newest run. Each row has its status, attempt, duration and a
    one-line preview of its result; a failed step's traceback follows.

    \b
    Examples:
      lil show customer_sync
      lil show 01JD7X3K9Q --step fetch_user
      lil show customer_sync --follow
    """
    from . import render
    from .inspection import find_run, show_run

    store = _store(ctx)
    try:
        run = find_run(store, ref)
        if not follow:
            detail = show_run(store, run)
            if as_json and step_key is not None:
                _echo_json(_step_json(detail, step_key))
            elif as_json:
                _echo_json(detail.as_dict())
            elif step_key is not None:
                render.echo(_step_text(detail, step_key))
            else:
                render.echo(_show_text(detail, full))
            return
        _follow(store, ref, run, interval, as_json)
    finally:
        store.close()


def _follow(store: Any, ref: str, run: Any, interval: float, as_json: bool) -> None:
    from . import render
    from .inspection import find_run, show_run

    tty = sys.stdout.isatty() and not as_json
    last = None
    try:
        while True:
            # Following a goal follows its newest run (a restart keeps the same run).
            run = find_run(store, run.id if ref == run.id else ref)
            detail = show_run(store, run)
            r = detail.run
            if tty:
                click.clear()
                render.echo(_show_text(detail, False))
            else:
                seen = (r.id, r.state, r.steps_done, r.steps_failed, r.markers)
                if seen != last:
                    last = seen
                    if as_json:
                        click.echo(
                            render.json_text(
                                {
                                    "run": r.id,
                                    "state": r.state,
                                    "steps_done": r.steps_done,
                                    "previous_steps": detail.previous_steps,
                                    "at": datetime.now().astimezone().isoformat(),
                                },
                                indent=None,
                            )
                        )
                    else:
                        of = f"/{detail.previous_steps}" if detail.previous_steps else ""
                        latest = detail.rows[-1].key if detail.rows else "-"
                        render.echo(
                            f"{datetime.now().strftime('%H:%M:%S')}  {r.id}  "
                            f"{render.colour(r.state, r.state)}  "
                            f"{r.steps_done}{of} steps  last: {render.clip(latest, 30)}"
                        )
            if r.state in ("completed", "failed"):
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        return


@cli.command()
@click.argument("goal")
@click.option(
    "--run",
    "run_ref",
    metavar="RUN",
    help="The run to forget (id or name); default: the run Journal(GOAL) would resume.",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def reset(ctx: click.Context, goal: str, run_ref: str | None, yes: bool) -> None:
    """Forget a run's journal so the next open starts it fresh.

    Deletes the run, its attempts, steps and run-scoped markers. Without
    --run it forgets the run that Journal(GOAL) would resume (the newest
    unfinished one). Refuses a run held by a live process.

    \b
    Examples:
      lil reset customer_sync
      lil reset customer_sync --run 01JD7X3K9QF4ZC2M8N6P0RTVWY --yes
    """
    from . import render
    from .inspection import reset_run, reset_target, resumable_run

    store = _store(ctx)
    try:
        target = reset_target(store, goal, run_ref)
        if not yes:
            if not sys.stdin.isatty():
                raise click.ClickException(
                    f"reset would forget run {target.id} of goal {goal!r} ({target.steps_done} "
                    f"steps done); pass --yes to confirm when not at a terminal"
                )
            click.confirm(
                render.safe(
                    f"Forget run {target.id} of goal {goal!r} ({target.state}, "
                    f"{target.steps_done} steps done, {target.markers} markers)?"
                ),
                abort=True,
            )
        gone = reset_run(store, goal, target.id)
        nxt = resumable_run(store, goal)
    finally:
        store.close()
    then = f"resumes run {nxt.id}" if nxt else "starts a new run"
    if gone.name:
        then = f"with run={gone.name!r} starts a new run"
    render.echo(
        f"forgot run {gone.id} of goal {goal!r} ({gone.steps_done} steps, {gone.markers} markers); "
        f"the next Journal({goal!r}) {then}"
    )


@cli.command()
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--from-step",
    "from_step",
    required=True,
    metavar="KEY",
    help="The first step to run again; the steps before it keep their results.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def fork(ctx: click.Context, run_ref: str, from_step: str, as_json: bool) -> None:
    """Re-run RUN from step KEY on, keeping the results before KEY.

    The way out after a bug fix or a code change under a recorded run. The
    fork becomes the goal's newest unfinished run, so the next Journal(GOAL)
    resumes it; a named run's fork takes over its name (the source is
    renamed NAME@RUN_ID).

    \b
    Example:
      lil fork 01JD7X3K9QF4ZC2M8N6P0RTVWY --from-step summarize
    """
    from . import render
    from .inspection import fork_run

    store = _store(ctx)
    try:
        result = fork_run(store, run_ref, from_step)
    finally:
        store.close()
    new, src = result.run, result.source
    if as_json:
        _echo_json(
            {
                "run": new.as_dict(),
                "source": src.as_dict(),
                "copied": result.copied,
                "source_renamed_to": result.source_renamed_to,
            }
        )
        return
    kept = ", ".join(result.copied[:5]) + (", …" if len(result.copied) > 5 else "")
    out: list[str] = []
    out.append(f"forked run {src.id} of goal {src.goal!r} from step {from_step!r}")
    out.append(
        f"new run {new.id} keeps {len(result.copied)} recorded results"
        f"{' (' + kept + ')' if kept else ''}"
    )
    out.append(f"and re-executes {from_step!r} and every step after it.")
    if result.source_renamed_to:
        out.append(
            f"It took over the name {new.name!r}; the source is now named "
            f"{result.source_renamed_to!r}."
        )
        out.append(f"Next: Journal({src.goal!r}, run={new.name!r}) resumes the fork.")
    else:
        out.append(f"Next: Journal({src.goal!r}) resumes the fork.")
    if src.state in ("failed", "crashed"):
        out.append(
            f"Note: run {src.id} is still unfinished; once the fork completes, "
            f"Journal({src.goal!r}) would resume it; "
            f"'lil reset {src.goal} --run {src.id}' forgets it."
        )
    render.echo(out)


@cli.command()
@click.option(
    "--older-than",
    "older_than",
    type=_Duration(),
    required=True,
    help="Remove runs idle for longer than this (30d, 12h, 2w).",
)
@click.option(
    "--status",
    type=_STATE_CHOICE,
    multiple=True,
    help="Only runs in this state (repeatable); default: every state but running.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be removed; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def gc(
    ctx: click.Context, older_than: Any, status: tuple[str, ...], dry_run: bool, as_json: bool
) -> None:
    """Delete old runs and their rows, then reclaim the space.

    A run is old when its last activity is older than --older-than. Runs
    held by a live process are never removed.

    \b
    Examples:
      lil gc --older-than 30d --dry-run
      lil gc --older-than 30d --status completed
    """
    from . import render
    from .inspection import gc_runs

    store = _store(ctx)
    try:
        result = gc_runs(store, older_than, status=status or None, dry_run=dry_run)
    finally:
        store.close()
    if as_json:
        _echo_json(result.as_dict())
        return
    verb = "would remove" if dry_run else "removed"
    if result.removed:
        rows = [
            [r.id, r.goal, r.state, str(r.steps_done), render.local_time(r.updated_at, short=True)]
            for r in result.removed
        ]
        render.echo(
            render.table(
                ["RUN", "GOAL", "STATE", "STEPS", "LAST SEEN"], rows, right=(3,), flex=[(1, 6)]
            )
        )
    for r in result.skipped_live:
        render.echo(f"kept run {r.id} of goal {r.goal!r}: a live process holds it")
    summary = f"{verb} {len(result.removed)} runs ({result.rows_deleted} steps and markers)"
    if result.supervisor_events_deleted:
        summary += f" and {result.supervisor_events_deleted} supervisor events"
    if not dry_run and result.removed:
        summary += f"; file {result.bytes_before:,} → {result.bytes_after:,} bytes"
    render.echo(summary)


@cli.command()
@click.argument("ref", metavar="RUN|GOAL")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "ndjson"]),
    default="json",
    show_default=True,
    help="One JSON document, or one JSON record per line.",
)
@click.pass_context
def export(ctx: click.Context, ref: str, fmt: str) -> None:
    """Print a run with its steps, markers and decoded results as JSON.

    For bug reports and tests. Timestamps are ISO-8601 UTC; each row has its
    decoded "result", the stored JSON text as "result_json", and
    "result_error": null, or why a damaged stored text could not be decoded.
    The output is strict JSON: an int too long for decimal text is written
    {"!int": "0x…"} and nan or infinity {"!float": "nan"}, as in the journal.

    \b
    Examples:
      lil export 01JD7X3K9QF4ZC2M8N6P0RTVWY > run.json
      lil export customer_sync --format ndjson | jq -c 'select(.record == "row")'
    """
    from .inspection import export_records, export_run, find_run
    from .render import json_text

    store = _store(ctx)
    try:
        run = find_run(store, ref)
        if fmt == "json":
            _echo_json(export_run(store, run))
        else:
            for record in export_records(store, run):
                click.echo(json_text(record, indent=None))
    finally:
        store.close()


def main() -> None:
    """The ``lil`` console script."""
    cli(prog_name="lil")
