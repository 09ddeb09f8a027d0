"""``lil mcp``: the journal served to an MCP client (an agent) over stdio.

The work is in :mod:`letitloop.mcp.server`; the MCP SDK (the ``mcp`` extra)
is imported only when the command runs, so ``lil --help`` never loads it.
"""

from __future__ import annotations

import click

from .params import db_option, db_path


@click.command(name="mcp")
@db_option
@click.pass_context
def mcp_command(ctx: click.Context) -> None:
    """Serve the journal to an MCP client over stdio (started by the client).

    Tools: list_runs, show_run and export_run read the journal read-only and
    never change it; reset_run, cancel_run (destructive), fork_run and
    send_value change it, as lil reset/cancel/fork/send do, and are
    annotated so. Every refusal is a tool error of one line; the server goes
    on serving. Pass --db with an absolute path: a client starts the server
    in a folder of its own choosing. Needs the mcp extra (in a checkout of
    letitloop: pip install -e '.[mcp]'). docs/mcp.md shows a client's
    configuration.

    \b
    Example:
      lil mcp --db /data/pipeline/.letitloop/journal.db
    """
    try:
        from ..mcp.server import serve
    except ImportError as exc:
        raise click.ClickException(
            f"lil mcp needs the MCP SDK, which is not installed ({exc}); in your clone of "
            f"letitloop, install the mcp extra: pip install -e '.[mcp]'"
        ) from None
    serve(db_path(ctx))
