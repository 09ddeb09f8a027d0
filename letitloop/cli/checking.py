"""``lil check``: before a deploy, replay the unfinished runs against the code as it is now.

The work is in :mod:`letitloop.deploycheck`, the words in
:mod:`letitloop.runtext.checks`.
"""

from __future__ import annotations

import contextlib
import sys

import click

from .params import db_option, db_path, json_flags


@click.command()
@click.argument("target", metavar="MODULE[:FUNCTION]")
@click.option(
    "--patches",
    "show_patches",
    is_flag=True,
    help="Also say, per patch met, which runs take its old path (deprecate_patch is safe "
    "when none does).",
)
@json_flags
@db_option
@click.pass_context
def check(
    ctx: click.Context,
    target: str,
    show_patches: bool,
    as_json: bool,
    as_jsonl: bool,
) -> None:
    """Would the unfinished runs resume under the code as it is now? Exit 1 if any would stop.

    Imports MODULE (from the current folder, or a .py file) and replays every
    unfinished run (running, crashed, failed, waiting) of its @durable
    functions (or of FUNCTION) on a copy of the journal, in replay-only mode:
    no step function is called and the journal is not written. Per run: it
    resumes cleanly (up to the first step its recording lacks, which would
    run fresh), or would stop at step K (recorded by another function, or
    for other arguments), and the patches whose old path it takes. Code
    between steps runs as in a resume; what it prints goes to stderr.

    \b
    Examples:
      lil check sync_workflow
      lil check app.flows:nightly --patches
      lil check flows.py --json
    """
    from ..deploycheck import check as check_runs
    from ..runtext import render
    from ..runtext.checks import check_lines, patch_lines

    journal = db_path(ctx)  # else the decorator's path=, $LETITLOOP_DB, the nearest one
    with contextlib.redirect_stdout(sys.stderr):  # the code's prints are not the report
        report = check_runs(target, journal)
    if as_json or as_jsonl:
        records = [r.as_dict() for r in report.runs]
        render.echo_jsonl(records) if as_jsonl else render.echo_json(records)
    else:
        render.echo(check_lines(report))
        if show_patches:
            render.echo(patch_lines(report))
    if report.strands:
        ctx.exit(1)
