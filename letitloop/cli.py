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
# Thin: the work is in letitloop.inspection, the words in letitloop.runtext, the
# text's safety in letitloop.render.


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


def _set_db(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    """``lil COMMAND --db PATH``: the same as ``lil --db PATH COMMAND``."""
    if value is not None:
        ctx.find_root().ensure_object(dict)["db"] = value


def _db_option(f: Any) -> Any:
    return click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        expose_value=False,
        callback=_set_db,
        help="The journal file (also accepted before the command).",
    )(f)


def _db_path(ctx: click.Context) -> Path | None:
    root = ctx.find_root()
    db = (root.obj or {}).get("db") if isinstance(root.obj, dict) else None
    return db if db is not None else root.params.get("db")


def _store(ctx: click.Context, *, write: bool = False, live: bool = False) -> Any:
    """The journal for a command: read-only unless the command changes it (``write``)."""
    from .inspection import open_journal_file

    return open_journal_file(_db_path(ctx), write=write, live=live)


# -- shell completion: goals, runs and step keys, read from the journal ----------------


def _completion_rows(ctx: click.Context, sql: str, params: tuple[Any, ...]) -> list[Any]:
    """Rows of a read-only query on the journal; nothing when there is no usable journal."""
    import sqlite3

    from .store import resolve_path

    try:
        path = resolve_path(_db_path(ctx))
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()
    except Exception:  # completion never fails the shell: no journal, no words
        return []


def _like(incomplete: str) -> str:
    return incomplete.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _complete_goals(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    rows = _completion_rows(
        ctx,
        "SELECT goal FROM goals WHERE goal LIKE ? ESCAPE '\\' ORDER BY goal LIMIT 200",
        (_like(incomplete),),
    )
    return [click.shell_completion.CompletionItem(g, help="goal") for (g,) in rows]


def _complete_runs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Goals, then run ids (newest first) and run names that start with what was typed."""
    item = click.shell_completion.CompletionItem
    found = _complete_goals(ctx, param, incomplete)
    for rid, goal, name, status in _completion_rows(
        ctx,
        "SELECT id, goal, name, status FROM runs WHERE id LIKE ? ESCAPE '\\' OR name LIKE ? "
        "ESCAPE '\\' ORDER BY rowid DESC LIMIT 200",
        (_like(incomplete.upper()), _like(incomplete)),
    ):
        word = rid if rid.startswith(incomplete.upper()) else name
        found.append(item(word, help=f"run of {goal} ({status})"))
    return found


def _complete_keys(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
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


# -- output helpers -------------------------------------------------------------------


def _echo_json(data: Any) -> None:
    from .render import json_text

    click.echo(json_text(data))


def _echo_jsonl(records: Any) -> None:
    from .render import json_text

    for record in records:
        click.echo(json_text(record, indent=None))


def _confirm(question: str, refusal: str, yes: bool) -> None:
    """Ask on a terminal; off one (a script, a pipe) require --yes: the same rule everywhere."""
    from .render import safe

    if yes:
        return
    if not sys.stdin.isatty():
        raise click.ClickException(safe(refusal + "; pass --yes to confirm when not at a terminal"))
    click.confirm(safe(question), abort=True)


_STATE_CHOICE = click.Choice(
    ["running", "crashed", "pending", "waiting", "completed", "failed", "cancelled"]
)


def _key_values(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, str]]:
    out = []
    for v in values:
        key, eq, value = v.partition("=")
        if not eq or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE (user_id=7, user.name=ada), got {v!r}")
        out.append((key.strip(), value))
    return out


def _json_flags(f: Any) -> Any:
    f = click.option(
        "--jsonl", "as_jsonl", is_flag=True, help="One JSON record per line (JSON lines)."
    )(f)
    return click.option(
        "--json", "as_json", is_flag=True, help="Machine-readable output (UTC timestamps)."
    )(f)


@cli.command()
@click.argument("goal", required=False, shell_complete=_complete_goals)
@click.option(
    "--status", type=_STATE_CHOICE, multiple=True, help="Only runs in this state (repeatable)."
)
@click.option(
    "--since",
    type=_Since(),
    help="Only runs started since: a duration ago (2h, 7d) or a date/time.",
)
@click.option(
    "--until",
    type=_Since(),
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
    callback=_key_values,
    help="Only runs whose recorded input has VALUE (JSON, else text) at KEY; repeatable.",
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
@_json_flags
@_db_option
@click.pass_context
def runs(
    ctx: click.Context,
    goal: str | None,
    status: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    name_glob: str | None,
    inputs: list[tuple[str, str]],
    limit: int,
    offset: int,
    as_json: bool,
    as_jsonl: bool,
) -> None:
    """List runs, newest first: state, name, steps done, cost, what each is doing.

    A run whose process died without finishing shows as "crashed", with the
    step it died in; one held by a live process as "running", with the step
    it has been in for more than a second (or its sleep, wait or retry); a
    fork nobody opened yet as "pending"; a run that stopped to wait for
    outside input as "waiting"; a cancelled one as "cancelled". COST sums
    what its steps reported (letitloop.usage). Off a terminal every value is
    printed whole. When more runs match than --limit, the output says so (on
    stderr with --json/--jsonl).

    \b
    Examples:
      lil runs
      lil runs customer_sync --status failed --status crashed --since 1d
      lil runs --name 'user-*' --input user_id=7
      lil runs --jsonl --limit 0 | jq -r 'select(.state == "crashed") | .id'
    """
    from . import render
    from .inspection import list_runs
    from .runtext.runs import more_text, no_runs_line, runs_lines

    store = _store(ctx)
    try:
        found = list_runs(
            store,
            goal,
            status=status or None,
            since=since,
            until=until,
            name=name_glob,
            inputs=inputs,
            limit=limit + 1 if limit else None,
            offset=offset,
        )
    finally:
        store.close()
    more = None
    if limit and len(found) > limit:
        found = found[:limit]
        more = more_text(len(found), offset, limit)
    if as_json or as_jsonl:
        records = [r.as_dict() for r in found]
        _echo_jsonl(records) if as_jsonl else _echo_json(records)
        if more:
            render.echo(more, err=True)
        return
    if not found:
        render.echo(no_runs_line(goal, store.path))
        return
    render.echo(runs_lines(found, more))


@cli.command()
@click.argument("ref", metavar="RUN|GOAL", shell_complete=_complete_runs)
@click.option("--full", is_flag=True, help="Print the input, result and every step's in full.")
@click.option(
    "--step",
    "step_key",
    metavar="KEY",
    shell_complete=_complete_keys,
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
@_json_flags
@_db_option
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

    RUN is a run id (or a unique prefix of one, or a run name); GOAL means
    the goal's newest run. Each row has its status, attempt, duration and a
    one-line preview of its result; a step running for more than a second
    shows as running, and one its attempt left unfinished as interrupted.
    Each attempt says how it ended (and which `lil watch` started it).
    --json and --jsonl give what `lil export` gives: decoded results.

    \b
    Examples:
      lil show customer_sync
      lil show 01JD7X3K9Q --step fetch_user
      lil show customer_sync --follow
    """
    from . import render
    from .inspection import export_records, export_run, find_run, show_run
    from .runtext.detail import show_lines, step_lines, step_record

    store = _store(ctx, live=follow)
    try:
        run = find_run(store, ref)
        if follow:
            sys.exit(_follow(store, ref, run, interval, as_json or as_jsonl))
        detail = show_run(store, run)
        if step_key is not None and (as_json or as_jsonl):
            step = step_record(detail, step_key)
            _echo_jsonl([step]) if as_jsonl else _echo_json(step)
        elif as_jsonl:
            _echo_jsonl(export_records(store, detail))
        elif as_json:
            _echo_json(export_run(store, detail))
        elif step_key is not None:
            render.echo(step_lines(detail, step_key))
        else:
            render.echo(show_lines(detail, full))
    finally:
        store.close()


def _follow(store: Any, ref: str, run: Any, interval: float, as_json: bool) -> int:
    """``lil show --follow``: its exit status (0 completed, 1 failed or left crashed)."""
    from . import render
    from .inspection import find_run, resumer, show_run
    from .runtext.detail import show_lines
    from .runtext.follow import end_line, follow_line, follow_record, watcher_text

    tty = sys.stdout.isatty() and not as_json
    last: Any = None
    told: Any = None
    try:
        while True:
            # Following a goal follows its newest run (a restart keeps the same run).
            run = find_run(store, run.id if ref == run.id else ref)
            detail = show_run(store, run)
            r = detail.run
            watcher = resumer(store, r) if r.state in ("crashed", "pending") else None
            waiting = watcher_text(watcher) if watcher is not None else None
            if tty:
                lines = show_lines(detail, False) + ([waiting] if waiting else [])
                if lines != last:  # redraw only what changed
                    last = lines
                    click.clear()
                    render.echo(lines)
            else:
                live = tuple(f.key for f in r.in_flight if f.live)
                paused = tuple((p.key, p.status) for p in r.pauses)
                seen = (
                    r.id,
                    r.state,
                    r.steps_done,
                    r.steps_failed,
                    r.markers,
                    live,
                    waiting,
                    paused,
                )
                if seen != last:
                    last = seen
                    if as_json:
                        click.echo(render.json_text(follow_record(detail, watcher), indent=None))
                    else:
                        render.echo(follow_line(detail))
                        if waiting and waiting != told:
                            told = waiting
                            render.echo(f"{r.id}  {waiting}")
            if r.state == "completed":
                return 0
            if r.state in ("failed", "cancelled", "waiting") or (
                r.state in ("crashed", "pending") and watcher is None
            ):
                if not as_json:
                    render.echo(end_line(r))
                return 1
            time.sleep(interval)
    except KeyboardInterrupt:
        return 130


@cli.command()
@click.argument("ref", metavar="RUN|GOAL", shell_complete=_complete_runs)
@click.option(
    "--run",
    "run_ref",
    metavar="RUN",
    help="With a GOAL: the run of it to forget (id, id prefix or name); "
    "default: the run Journal(GOAL) would resume.",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--dry-run", is_flag=True, help="Say which run would be forgotten; change nothing.")
@_db_option
@click.pass_context
def reset(ctx: click.Context, ref: str, run_ref: str | None, yes: bool, dry_run: bool) -> None:
    """Forget a run's journal so the next open starts it fresh.

    Deletes the run, its attempts, steps and run-scoped markers. RUN is a
    run id, a unique prefix of one or a run name; a GOAL means the run that
    Journal(GOAL) would resume (its newest unfinished unnamed run), or with
    --run that run of the goal. Asks first on a terminal; elsewhere --yes is
    required. Refuses a run held by a live process.

    \b
    Examples:
      lil reset customer_sync
      lil reset 01JD7X3K9Q --yes
      lil reset customer_sync --run 2026-11-30 --dry-run
    """
    from . import render
    from .inspection import resumable_run
    from .maintenance import reset_run, reset_target
    from .runtext.changes import reset_line, reset_target_text

    store = _store(ctx, write=True)
    try:
        target = reset_target(store, ref, run_ref)
        what = reset_target_text(target)
        if dry_run:
            render.echo(f"would forget {what}")
            return
        _confirm(f"Forget {what}?", f"reset would forget {what}", yes)
        gone = reset_run(store, target.id)
        nxt = resumable_run(store, gone.goal)
    finally:
        store.close()
    render.echo(reset_line(gone, nxt))


@cli.command()
@click.argument("run_ref", metavar="RUN", shell_complete=_complete_runs)
@click.option(
    "--from-step",
    "from_step",
    required=True,
    metavar="KEY",
    shell_complete=_complete_keys,
    help="The first step to run again; the steps before it keep their results.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_db_option
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
    from . import render
    from .maintenance import fork_run
    from .runtext.changes import fork_lines, fork_record

    store = _store(ctx, write=True)
    try:
        result = fork_run(store, run_ref, from_step)
    finally:
        store.close()
    if as_json:
        _echo_json(fork_record(result))
        return
    render.echo(fork_lines(result, from_step))


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
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--dry-run", is_flag=True, help="Print what would be removed; change nothing.")
@_json_flags
@_db_option
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
    no goal-scoped marker) goes too, with its journal table. Asks first on a
    terminal; elsewhere --yes is required (--dry-run only lists).

    \b
    Examples:
      lil gc --older-than 30d --dry-run
      lil gc --older-than 30d --status completed --yes
    """
    from . import render
    from .maintenance import gc_runs
    from .runtext.changes import gc_lines, gc_records, gc_target_text

    store = _store(ctx, write=True)
    try:
        result = gc_runs(store, older_than, status=status or None, dry_run=True)
        if not dry_run and (result.removed or result.goals_removed):
            what = gc_target_text(result)
            _confirm(f"Remove {what}?", f"gc would remove {what}", yes)
        if not dry_run:
            result = gc_runs(store, older_than, status=status or None)
    finally:
        store.close()
    if as_jsonl:
        _echo_jsonl(gc_records(result))
        return
    if as_json:
        _echo_json(result.as_dict())
        return
    render.echo(gc_lines(result, dry_run))


@cli.command()
@click.argument("ref", metavar="RUN|GOAL", shell_complete=_complete_runs)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "ndjson", "jsonl"]),
    default="json",
    show_default=True,
    help="One JSON document, or one JSON record per line (ndjson and jsonl are the same).",
)
@click.option("--jsonl", "as_jsonl", is_flag=True, help="The same as --format jsonl.")
@_db_option
@click.pass_context
def export(ctx: click.Context, ref: str, fmt: str, as_jsonl: bool) -> None:
    """Print a run with its input, steps, markers and decoded results as JSON.

    For bug reports and tests. Timestamps are ISO-8601 UTC; each row has its
    decoded "result", the stored JSON text as "result_json", and
    "result_error": null, or why a damaged stored text could not be decoded.
    The run has its decoded "input" and "result" the same way.
    The output is strict JSON: an int too long for decimal text is written
    {"!int": "0x…"} and nan or infinity {"!float": "nan"}, as in the journal.

    \b
    Examples:
      lil export 01JD7X3K9QF4ZC2M8N6P0RTVWY > run.json
      lil export customer_sync --jsonl | jq -c 'select(.record == "row")'
    """
    from .inspection import export_records, export_run, find_run

    store = _store(ctx)
    try:
        run = find_run(store, ref)
        if fmt == "json" and not as_jsonl:
            _echo_json(export_run(store, run))
        else:
            _echo_jsonl(export_records(store, run))
    finally:
        store.close()


@cli.command()
@_db_option
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
    from . import render
    from .migrate import known_names

    store = _store(ctx, write=True)
    try:
        render.echo(f"{store.path}: schema at {known_names()[-1]}")
    finally:
        store.close()


# -- from outside a run: lil send / cancel ---------------------------------------------
# The work is in letitloop.control; a live holder notices it on its own.


def _json_value(text: str, where: str) -> Any:
    """``text`` parsed as JSON; a one-line error saying what JSON looks like otherwise."""
    import json

    try:
        return json.loads(text)
    except ValueError as exc:
        from .render import clip

        # _one_line makes the message safe for the terminal.
        raise click.ClickException(
            f'expected {where} as JSON (true, 42, "some text" in double quotes, '
            f'{{"approved": true}}), got {clip(repr(text), 60)}: {exc}; to send text, '
            f"quote it: '\"yes\"'"
        ) from None


@cli.command()
@click.argument("ref", metavar="RUN|GOAL", shell_complete=_complete_runs)
@click.argument("name", metavar="NAME")
@click.argument("value", metavar="[VALUE]", required=False)
@click.option(
    "--file",
    "file",
    type=click.File("r", encoding="utf-8"),
    help="Read the value (JSON) from this file ('-' for stdin) instead of VALUE.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_db_option
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
    from . import codec, render
    from .control import send_text
    from .runtext.changes import sent_line, sent_record

    if (value is None) == (file is None):
        raise click.UsageError("expected a VALUE or --file PATH (one of them); see lil send --help")
    parsed = _json_value(file.read() if file is not None else str(value), "the value")
    text = codec.encode(parsed)
    store = _store(ctx, write=True)
    try:
        sent = send_text(store, ref, name, text)
    finally:
        store.close()
    if as_json:
        _echo_json(sent_record(sent))
        return
    render.echo(sent_line(sent, parsed))


@cli.command()
@click.argument("ref", metavar="RUN|GOAL", shell_complete=_complete_runs)
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
@_db_option
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
    means its newest run.

    \b
    Examples:
      lil cancel 01JD7X3K9Q --reason "wrong input file"
      lil cancel nightly_report --wait 30
    """
    from . import render
    from .control import cancel_run, wait_until_stopped
    from .runtext.changes import (
        cancel_line,
        cancel_record,
        rerun_hint,
        still_held_text,
        stopped_line,
    )

    store = _store(ctx, write=True)
    try:
        done = cancel_run(store, ref, reason=reason)
        run = done.run
        if wait_s is not None and not done.at_once:
            run = wait_until_stopped(store, run.id, wait_s)
    finally:
        store.close()
    if as_json:
        _echo_json(cancel_record(done, run))
    else:
        render.echo(cancel_line(done, run))
        if wait_s is not None and not done.at_once:
            if run.state == "running":
                raise click.ClickException(render.safe(still_held_text(run, wait_s)))
            render.echo(stopped_line(run))
    if not as_json and run.state in ("cancelled", "running"):
        render.echo(rerun_hint(run))


def main() -> None:
    """The ``lil`` console script."""
    cli(prog_name="lil")
