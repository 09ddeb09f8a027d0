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


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--max-kills", type=click.IntRange(min=1), help="Try at most this many kill points.")
@click.option(
    "--order",
    type=click.Choice(["exhaustive", "random"]),
    default="exhaustive",
    show_default=True,
    help="Kill points in the order the program reaches them, or shuffled (--seed).",
)
@click.option("--seed", type=int, help="Seed of --order random, to repeat a shuffle.")
@click.option(
    "--effects",
    metavar="FILE",
    help="A file the program appends one line to per side effect (a path relative to its "
    "working folder); a line found more often than in the reference run is a repeat.",
)
@click.option(
    "--max-reruns",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Reruns after each kill before the trial counts as not finishing.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds one run of the program may take.",
)
@click.option(
    "--output",
    metavar="exact|last-line|match:REGEX|ignore",
    default="exact",
    show_default=True,
    help="What of a finished run's standard output must equal the reference's: all of it, "
    "its last line (for a program that also prints what ran in this process), the lines "
    "that match REGEX (match:^answer: ), or nothing.",
)
def crashtest(
    command: tuple[str, ...],
    max_kills: int | None,
    order: str,
    seed: int | None,
    effects: str | None,
    max_reruns: int,
    timeout: float,
    output: str,
) -> None:
    """SIGKILL a program at every step and rerun it: find what ran twice.

    Runs COMMAND once for reference, then once per kill point (before each
    step, at its body's start, after its body returned but before its record
    is committed; at each atomic_marker body's start), killed there, then
    again until it finishes; each trial in a fresh empty folder with its own
    journal ($LETITLOOP_DB; with $LETITLOOP_DB a postgresql:// URL, a fresh
    schema of that database, dropped after the trial). Reports a step or marker body that ran again
    after its record was committed, a step whose key changed between runs,
    a paid call (letitloop.usage) recorded again at a place whose step was
    committed, repeated --effects lines and a finished output that differs;
    a call in flight at a kill and paid again is listed apart, as allowed.
    Exit status 1 on any repeat or difference. See docs/crashtest.md.

    \b
    Example:
        lil crashtest -- python pipeline.py orders.csv
        lil crashtest --effects sent.log --max-kills 20 --order random --seed 7 -- python app.py
    """
    from ..supervision.crashtest import crashtest as run_crashtest
    from ..supervision.crashtest import describe

    report = run_crashtest(
        list(command),
        max_kills=max_kills,
        seed=seed,
        order=order,
        effects=effects,
        max_reruns=max_reruns,
        timeout=timeout,
        output=output,
    )
    for line in describe(report, list(command)):
        click.echo(line)
    if report.repeats or report.problems:
        sys.exit(1)
