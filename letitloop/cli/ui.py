"""``lil ui``: serve a local, read-only web view of the journal's runs (``letitloop[ui]``)."""

from __future__ import annotations

import contextlib

import click

from .params import db_option, db_path

#: What to install when the web view's packages are missing.
UI_EXTRA = "pip install -e '.[ui]' (in your clone)"


def ui_modules() -> None:
    """Import what the web view needs, or stop with the command that installs it."""
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise click.ClickException(
            f"lil ui needs the web view's packages ({exc.name} is not installed): {UI_EXTRA}"
        ) from None


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on (another than the loopback needs --allow-remote).",
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8765,
    show_default=True,
    help="The port (0: a free one; the address is printed; a taken one is refused, saying so).",
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Serve on an address the network can reach: the printed address carries a token, "
    "and requests without it are refused.",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
@db_option
@click.pass_context
def ui(ctx: click.Context, host: str, port: int, allow_remote: bool, open_browser: bool) -> None:
    """Serve a local web view of the runs: crashes, resumes, steps, cost; live.

    The runs page lists runs as `lil runs` does (filters, paging; arrow keys
    or j/k move between them); a run's page shows its attempts as a timeline
    (ran, replayed, failed, retried, killed, in flight, sleeping, waiting),
    every step's result, the failed step's traceback, usage and what replay
    saved, and updates while the run progresses. Read-only: the journal is
    never written or migrated, and the page has no buttons that change it.
    Needs the ui extra: pip install -e '.[ui]' (in your clone).

    \b
    Examples:
      lil ui
      lil ui --db jobs.db --port 8000 --open
      lil ui --host 0.0.0.0 --allow-remote
    """
    ui_modules()
    from ..web.server import ListenError, serve

    try:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it stops
            serve(db_path(ctx), host, port, open_browser=open_browser, allow_remote=allow_remote)
    except ListenError as exc:  # the port is taken, or not ours to take: one line
        raise click.ClickException(str(exc)) from None
