"""The ``lil`` command line: one click group, a thin layer over the library.

This module holds the group, ``main`` (the console script) and how errors
end: every error a user can cause is one line (``click.ClickException``),
never a traceback; an unexpected one is one line too, saying how to see its
traceback (:data:`TRACEBACK_ENV`), with exit status 70. The commands are in
one module per family: ``reading`` (runs, show, export), ``changing``
(reset, fork, gc, upgrade), ``control`` (send, cancel), ``running``
(watch, demo), ``scheduling`` (schedules), ``serving`` (mcp), ``testing`` (fixture,
diff, crashtest) and ``ui``
(the web view); their shared
options in ``params``, shell completion in ``completion``. Recorded text is
printed only through
:mod:`letitloop.runtext.render`, which makes it safe for a terminal.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import click

from ..errors import LetItLoopError
from .changing import copy_command, fork, gc, reset, upgrade
from .checking import check
from .control import cancel, send
from .params import DB_PATH
from .reading import export, runs, show
from .running import demo, watch
from .scheduling import schedules
from .serving import mcp_command
from .testing import crashtest, diff, fixture
from .ui import ui
from .verifying import rekey, verify
from .working import queues, worker

__all__ = [
    "INTERNAL_ERROR_STATUS",
    "TRACEBACK_ENV",
    "InternalError",
    "LilGroup",
    "cancel",
    "check",
    "cli",
    "crashtest",
    "demo",
    "diff",
    "export",
    "fixture",
    "fork",
    "gc",
    "main",
    "mcp_command",
    "queues",
    "rekey",
    "reset",
    "runs",
    "schedules",
    "send",
    "show",
    "ui",
    "upgrade",
    "verify",
    "watch",
    "worker",
]


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
    from ..runtext.render import safe

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
    type=DB_PATH,
    default=None,
    help=(
        "The journal file (default: $LETITLOOP_DB, else the nearest .letitloop/journal.db "
        "here or in a folder above)."
    ),
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


# The commands, one module per family; each is a plain click command until added here.
for _command in (runs, show, export, reset, fork, gc, upgrade, send, cancel, watch, demo, ui):
    cli.add_command(_command)
cli.add_command(copy_command)  # lil copy (cli/changing.py)
cli.add_command(mcp_command)  # lil mcp (cli/serving.py)
cli.add_command(fixture)  # lil fixture (cli/testing.py)
cli.add_command(diff)  # lil diff (cli/testing.py)
cli.add_command(crashtest)  # lil crashtest (cli/testing.py)
cli.add_command(verify)  # lil verify (cli/verifying.py)
cli.add_command(rekey)  # lil rekey (cli/verifying.py)
cli.add_command(check)  # lil check (cli/checking.py)
cli.add_command(worker)  # lil worker (cli/working.py)
cli.add_command(queues)  # lil queues (cli/working.py)
cli.add_command(schedules)  # lil schedules, lil schedules run (cli/scheduling.py)


def main() -> None:
    """The ``lil`` console script."""
    cli(prog_name="lil")
