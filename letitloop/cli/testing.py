"""The commands that turn recorded runs into tests: ``lil fixture`` and ``lil diff``.

The work is in :mod:`letitloop.inspection.fixture` and
:mod:`letitloop.inspection.diff`, the words in :mod:`letitloop.runtext.testing`.
Both read the journal read-only; ``lil fixture`` writes only the new file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .completion import complete_runs
from .params import db_option, open_journal


@click.command()
@click.argument("ref", metavar="RUN|GOAL", shell_complete=complete_runs)
@click.option(
    "--to",
    "to",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The new journal file to write (tests/fixtures/agent.db).",
)
@click.option(
    "--redact",
    "redact",
    multiple=True,
    metavar="KEY",
    help="Replace the value of this dict key, at any depth of the input, the result and every "
    'row\'s result, by "[redacted]" (repeatable).',
)
@click.option("--force", is_flag=True, help="Replace the file at --to if it exists.")
@db_option
@click.pass_context
def fixture(ctx: click.Context, ref: str, to: Path, redact: tuple[str, ...], force: bool) -> None:
    """Copy one run into a small standalone journal file, for a replay test.

    The new file holds the run's goal, its input and result, its steps,
    markers, sleeps and waits (with their usage), and nothing else: no other
    run, no attempts or restarts, no process ids or host names. A test
    replays it without calling any step: Journal(GOAL, path=FILE,
    replay_only=True), or the pytest plugin's letitloop_replay marker
    (docs/testing.md). --redact KEY replaces that key's values (an API key,
    a password) in what is copied; the source journal is not changed.

    \b
    Examples:
      lil fixture customer_sync --to tests/fixtures/customer_sync.db
      lil fixture 01JD7X3K9Q --to tests/fixtures/agent.db --redact api_key
    """
    from ..inspection.fixture import make_fixture
    from ..runtext import render
    from ..runtext.testing import fixture_lines

    journal = open_journal(ctx)
    try:
        result = make_fixture(journal, ref, to, redact=redact, replace=force)
    finally:
        journal.close()
    render.echo(fixture_lines(result))


@click.command()
@click.argument("ref_a", metavar="RUN_A", shell_complete=complete_runs)
@click.argument("ref_b", metavar="RUN_B", shell_complete=complete_runs)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@db_option
@click.pass_context
def diff(ctx: click.Context, ref_a: str, ref_b: str, as_json: bool) -> None:
    """Compare two runs step by step: what was added, removed or changed.

    Rows are matched by key. For each: added or removed, another function,
    other arguments (which ones: the journal keeps a digest per argument),
    another status, another result (with the paths of the values that
    differ). Exit status 0 when the runs made the same steps with the same
    results, 1 when they differ.

    \b
    Examples:
      lil diff yesterday today
      lil diff 01JD7X3K9Q 01JD8B2M4R --json | jq '.differences[].key'
    """
    from ..inspection.diff import diff_runs
    from ..runtext import render
    from ..runtext.testing import diff_lines

    journal = open_journal(ctx)
    try:
        found = diff_runs(journal, ref_a, ref_b)
    finally:
        journal.close()
    if as_json:
        render.echo_json(found.as_dict())
    else:
        render.echo(diff_lines(found))
    sys.exit(1 if found.differences else 0)
