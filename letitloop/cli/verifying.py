"""The commands that take keys: ``lil verify`` (runs' sealed chains checked with the key,
their heads printed to keep) and ``lil rekey`` (a file's values re-encrypted with a new key).

The checking is :mod:`letitloop.inspection.verify`'s, the re-encrypting
:mod:`letitloop.maintenance.rekey`'s; this module reads the keys from the
environment (never from the command line, where other users of the machine
can read them) and prints one line a run or goal.
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
    from ..errors import LetItLoopError
    from ..inspection import RunFilter, find_run
    from ..inspection.verify import chain_of, check_chain, parse_heads, verify_key
    from ..runtext import render

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


@click.command()
@click.argument("goals", metavar="[GOAL]...", nargs=-1)
@click.option(
    "--new-key-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the new key from this file (its first line) instead of "
    "LETITLOOP_NEW_ENCRYPTION_KEY.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document: a record per goal.")
@db_option
@click.pass_context
def rekey(
    ctx: click.Context, goals: tuple[str, ...], new_key_file: Path | None, as_json: bool
) -> None:
    """Re-encrypt the journal's values with a new encryption key.

    The old key is read from LETITLOOP_ENCRYPTION_KEY, the new one from
    LETITLOOP_NEW_ENCRYPTION_KEY or --new-key-file (never from the command
    line). Each GOAL (default: every goal of the file) is re-encrypted in one
    transaction, with its key check, so a killed rekey leaves each goal under
    one key: run it again to finish. Refused while a live process holds a run
    of the goal. Sealed runs get their rewritten rows sealed again with
    LETITLOOP_SEAL_KEY. Then open the journal with the new key only.
    See docs/audit.md.

    \b
    Examples:
      lil rekey --new-key-file new.key
      lil rekey customer_sync --json
    """
    import os

    from ..integrity.encryption import ENCRYPTION_KEY_ENV, NEW_ENCRYPTION_KEY_ENV, make_cipher
    from ..integrity.seals import env_seal_key
    from ..maintenance import rekey as rekey_file
    from ..runtext import render

    old_text = os.environ.get(ENCRYPTION_KEY_ENV)
    new_text: str | None
    if new_key_file is not None:
        lines = new_key_file.read_text("utf-8").splitlines()
        new_text, where = (lines[0] if lines else ""), str(new_key_file)
    else:
        new_text, where = os.environ.get(NEW_ENCRYPTION_KEY_ENV), NEW_ENCRYPTION_KEY_ENV
    if not old_text:
        raise click.UsageError(
            f"expected the old key in {ENCRYPTION_KEY_ENV}; see lil rekey --help"
        )
    if not new_text:
        raise click.UsageError(
            f"expected the new key in {NEW_ENCRYPTION_KEY_ENV} or --new-key-file; see "
            f"lil rekey --help"
        )
    old, new = make_cipher(old_text, ENCRYPTION_KEY_ENV), make_cipher(new_text, where)
    assert old is not None and new is not None
    journal = open_journal(ctx, write=True)
    try:
        done = rekey_file(journal, old, new, goals=goals or None, seal_secret=env_seal_key())
    finally:
        journal.close()
    if as_json:
        render.echo_json(
            [
                {"goal": d.goal, "state": d.state, "values": d.values, "resealed": d.resealed}
                for d in done
            ]
        )
        return
    lines = []
    for d in done:
        if d.state == "rekeyed":
            sealed = f", {d.resealed} seal entries added" if d.resealed else ""
            lines.append(f"{d.goal}  {d.values} values re-encrypted{sealed}")
        elif d.state == "already":
            lines.append(f"{d.goal}  already under the new key")
        else:
            lines.append(f"{d.goal}  no encrypted values")
    lines.append(f"now open the journal with the new key as {ENCRYPTION_KEY_ENV}")
    render.echo(lines)
