"""What ``lil``'s commands share on their command lines: parameter types and common options.

Durations (``30d``), times (``2h`` ago, a date), run states, ``KEY=VALUE``
pairs, ``lil watch``'s restart limit and exit statuses, the ``--json`` and
``--jsonl`` flags, and ``--db`` (accepted before or after the command) with
the journal it names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import LetItLoopError
from ..stores.discovery import found_above
from ..stores.schemes import malformed_url, scheme_of

if TYPE_CHECKING:
    from ..inspection import Inspector


class Duration(click.ParamType):  # type: ignore[type-arg]
    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..inspection import parse_duration

        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Since(click.ParamType):  # type: ignore[type-arg]
    name = "WHEN"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..inspection import parse_since

        try:
            return parse_since(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


#: A number of seconds, 0 or more.
SECONDS = click.FloatRange(min=0)

STATE_CHOICE = click.Choice(
    ["running", "crashed", "pending", "waiting", "completed", "failed", "cancelled"]
)


def key_values(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> list[tuple[str, str]]:
    out = []
    for v in values:
        key, eq, value = v.partition("=")
        if not eq or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE (user_id=7, user.name=ada), got {v!r}")
        out.append((key.strip(), value))
    return out


def max_restarts(ctx: click.Context, param: click.Parameter, value: str) -> int | None:
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


def exit_statuses(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> frozenset[int]:
    """Exit statuses 0-255 or signal names (``SIGKILL`` means 137)."""
    from ..supervision.policy import parse_exit_status

    try:
        return frozenset(parse_exit_status(v) for v in values)
    except LetItLoopError as exc:
        raise click.BadParameter(str(exc)) from None


def json_flags(f: Any) -> Any:
    f = click.option(
        "--jsonl", "as_jsonl", is_flag=True, help="One JSON record per line (JSON lines)."
    )(f)
    return click.option(
        "--json", "as_json", is_flag=True, help="Machine-readable output (UTC timestamps)."
    )(f)


class DbPath(click.Path):
    """``--db``'s type: a path, but a URL (``scheme://``) is kept as its text.

    click's ``Path`` would make ``postgresql://h/db`` the path ``postgresql:/h/db``,
    a file name; kept whole, the command's open refuses it (``files.resolve_path``:
    UnknownStoreError, one line) and creates nothing.
    """

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and scheme_of(value) is not None:
            return value
        bad = malformed_url(value) if isinstance(value, str) else None
        if bad is not None:  # postgresql:/… is a typo of a URL, not a file
            self.fail(str(bad), param, ctx)
        return super().convert(value, param, ctx)


#: The one ``--db`` type, before or after the command.
DB_PATH = DbPath(dir_okay=False, path_type=Path)


def _set_db(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    """``lil COMMAND --db PATH``: the same as ``lil --db PATH COMMAND``."""
    if value is not None:
        ctx.find_root().ensure_object(dict)["db"] = value


def db_option(f: Any) -> Any:
    return click.option(
        "--db",
        type=DB_PATH,
        default=None,
        expose_value=False,
        callback=_set_db,
        help="The journal file (also accepted before the command).",
    )(f)


def db_path(ctx: click.Context) -> Path | None:
    root = ctx.find_root()
    db = (root.obj or {}).get("db") if isinstance(root.obj, dict) else None
    return db if db is not None else root.params.get("db")


def open_journal(ctx: click.Context, *, write: bool = False, live: bool = False) -> Inspector:
    """The journal for a command, as an inspector: read-only unless the command changes it
    (``write``)."""
    from ..inspection import open_inspector

    named = db_path(ctx)
    # lil is a process of its own: a store living in another process's memory is refused.
    journal = open_inspector(named, write=write, live=live, separate_process=True)
    if (
        named is None
        and not os.environ.get("LETITLOOP_DB")
        and isinstance(journal.path, Path)
        and found_above(journal.path)
    ):
        # Found in a folder above this one (as git finds .git): say which file it is.
        click.echo(f"lil: journal {journal.path} (found above this folder)", err=True)
    return journal
