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


def main() -> None:
    """The ``lil`` console script."""
    cli(prog_name="lil")
