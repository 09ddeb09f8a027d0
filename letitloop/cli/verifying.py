"""``lil verify``: check runs' sealed chains with the key, and print their heads to keep.

The checking is :mod:`letitloop.inspection.verify`'s; this module picks the
runs, reads the key from ``LETITLOOP_SEAL_KEY`` and prints one line a run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .completion import complete_runs
from .params import db_option, open_journal

#: The exit status when a chain is broken (1: the run was not what was sealed).
BROKEN_STATUS = 1


@click.command()
@click.argument("ref", metavar="[RUN|GOAL]", required=False, shell_complete=complete_runs)
@click.option("--all", "every", is_flag=True, help="Every run of GOAL, or of the file.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: a record per run.")
@click.option(
    "--print-head",
    is_flag=True,
    help="Print each sealed run's head ('RUN N SEAL') to keep outside the file.",
)
@click.option(
    "--head",
    "head_file",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="A file of heads kept with --print-head ('-': stdin): a run whose chain does "
    "not reach its kept head lost its tail.",
)
@db_option
@click.pass_context
def verify(
    ctx: click.Context,
    ref: str | None,
    every: bool,
    as_json: bool,
    print_head: bool,
    head_file: Path | None,
) -> None:
    """Check runs' sealed chains; exit 1 when one is broken.

    With LETITLOOP_SEAL_KEY set to the key the runs were sealed with, each
    run's chain is walked and its rows compared with what was sealed; the
    first broken link of each run is reported: an edited, deleted, swapped or
    inserted row or entry. A run written without the key is "unsealed", not
    broken. RUN is a run (id, prefix or name); GOAL means its newest run,
    with --all every run of it; --all alone, every run of the file.
    --print-head prints each run's last seal: kept elsewhere and passed back
    with --head, it also catches a run whose tail was removed.
    See docs/audit.md for what a seal proves and what it does not.

    \b
    Examples:
      lil verify customer_sync
      lil verify --all --print-head > heads.txt
      lil verify --all --head heads.txt
    """
    from .. import render
    from ..errors import LetItLoopError
    from ..inspection import RunFilter, find_run
    from ..inspection.verify import chain_of, check_chain, parse_heads, verify_key

    if ref is None and not every:
        raise click.UsageError("name a RUN or GOAL, or pass --all for every run of the file")
    secret = verify_key()
    heads = {}
    if head_file is not None:
        text = sys.stdin.read() if str(head_file) == "-" else head_file.read_text("utf-8")
        heads = parse_heads(text, str(head_file))
    journal = open_journal(ctx)
    try:
        if every and (ref is None or journal.has_goal(ref)):
            runs = journal.runs(RunFilter(goal=ref), limit=None)
        elif every:
            raise LetItLoopError(
                f"--all checks every run of a goal, or of the file: expected a goal, found "
                f"{ref!r}, which is none; drop --all to check one run"
            )
        else:
            assert ref is not None
            runs = [find_run(journal, ref)]
        found = []
        for run in sorted(runs, key=lambda r: (r.goal, r.started_at or "", r.id)):
            entries, rows = chain_of(journal, run)
            found.append(check_chain(run.id, run.goal, entries, rows, secret, heads.get(run.id)))
    finally:
        journal.close()
    if as_json:
        render.echo_json([f.as_dict() for f in found])
    elif print_head:
        render.echo([f.head.line() for f in found if f.head is not None and f.state == "sealed"])
        render.echo([f"{f.run_id}  broken: {f.broken}" for f in found if f.broken], err=True)
    else:
        lines = []
        for f in found:
            line = f"{f.run_id}  {f.goal}  {f.state}"
            if f.state == "broken":
                line += f": {f.broken}"
            elif f.state == "sealed":
                line += f" ({f.entries} entries)"
            if f.unsealed and f.state != "broken":
                line += f"; unsealed rows: {', '.join(f.unsealed)}"
            lines.append(line)
        if not lines:
            lines.append("no runs")
        render.echo(lines)
    if any(f.state == "broken" for f in found):
        sys.exit(BROKEN_STATUS)
