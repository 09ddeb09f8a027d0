"""letitloop's pytest plugin: a test replays a recorded run (a fixture file) in replay-only mode.

Registered through the ``pytest11`` entry point, so installing letitloop
beside pytest is enough; it does nothing to a test that does not ask for it.
A test asks with the marker::

    @pytest.mark.letitloop_replay("tests/fixtures/agent.db")
    def test_the_agent_still_makes_the_recorded_calls():
        run_agent("why?")   # its Journal / @durable replays the fixture, calling nothing

For that test, every journal opened without ``path=`` reads the fixture file
(``LETITLOOP_DB``) in replay-only mode (``LETITLOOP_REPLAY=only``): no step
function is called, nothing is written, and the first step that drifted from
the recording fails the test with a report naming it, the recorded and the
new function, and the recorded and the new arguments side by side. A
relative path is looked for under pytest's root folder, then beside the test
file; a fixture file that does not exist is an error of the test's setup
saying how to make one (``lil fixture``).

Two fixtures: ``letitloop_replay`` (the marker's file: ``.path``, and
``.journal(goal, ...)``, a replay-only ``Journal`` on it, for a pipeline that
takes its journal), and ``letitloop_clock``, a
:class:`~letitloop.testing.SkippingClock` made the default clock of every
journal the test opens, so sleeps, waits' timeouts and retries' backoffs take
no time.

A crash test: a test that asks for ``letitloop_crashtest`` calls it with the
command of a durable program; it runs ``lil crashtest``'s test of that
command (letitloop/supervision/crashtest.py: the program killed at every
step and rerun) and fails the test with the report when anything ran or was
paid twice, or returns the report. It reruns the program many times, so it
runs only under ``pytest --letitloop-crash``; otherwise the test is skipped,
saying so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from .errors import StepMismatchError, UnrecordedStepError
from .identity.fingerprint import same_digest
from .testing import SkippingClock, using_clock

MARKER = "letitloop_replay"

#: The item's stash key of its replay (the fixture file), set up by the marker.
_REPLAY = pytest.StashKey["Replay"]()
#: The environment the marker set for the test, undone at its teardown.
_UNDO = pytest.StashKey[pytest.MonkeyPatch]()


class Replay:
    """The fixture file a test replays (``letitloop_replay``), and journals on it."""

    def __init__(self, path: Path) -> None:
        #: The fixture file, absolute.
        self.path = path

    def journal(self, goal: str, **options: Any) -> Any:
        """A replay-only ``Journal(goal, path=<fixture>, **options)``: use it in a ``with``."""
        from .run.journal import Journal

        return Journal(goal, path=self.path, replay_only=True, **options)

    def __repr__(self) -> str:
        return f"Replay({str(self.path)!r})"


#: The option that runs the tests asking for ``letitloop_crashtest`` (skipped without it).
CRASH_OPTION = "--letitloop-crash"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("letitloop").addoption(
        CRASH_OPTION,
        action="store_true",
        default=False,
        help="Run the tests that use the letitloop_crashtest fixture: each kills its program "
        "at every step and reruns it (slow; skipped without this option).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(path): replay the recorded run in this journal file (made by "
        f"'lil fixture RUN --to PATH') in replay-only mode: no step is called, the first "
        f"step that drifted fails the test (letitloop).",
    )


def fixture_path(item: pytest.Item, given: object) -> Path:
    """Where the marker's file is: absolute, else under the root folder, else beside the test.

    Fails the test's setup (``pytest.fail``) when there is no such file.
    """
    if not isinstance(given, (str, os.PathLike)):
        pytest.fail(
            f"@pytest.mark.{MARKER} takes the fixture file's path, got {given!r}; "
            f"e.g. @pytest.mark.{MARKER}('tests/fixtures/agent.db')",
            pytrace=False,
        )
    path = Path(given)
    tried = (
        [path]
        if path.is_absolute()
        else [item.config.rootpath / path, Path(str(item.path)).parent / path]
    )
    for candidate in tried:
        if candidate.is_file():
            return candidate.resolve()
    pytest.fail(
        f"{MARKER}: the fixture file {os.fspath(given)} does not exist (looked for "
        f"{' and '.join(str(p) for p in tried)}); record the run, then make it with: "
        f"lil fixture RUN --to {os.fspath(given)}",
        pytrace=False,
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return
    if len(marker.args) != 1 or marker.kwargs:
        pytest.fail(
            f"@pytest.mark.{MARKER} takes one argument, the fixture file's path "
            f"(got {marker.args!r} {marker.kwargs!r})",
            pytrace=False,
        )
    path = fixture_path(item, marker.args[0])
    patch = pytest.MonkeyPatch()
    patch.setenv("LETITLOOP_DB", str(path))
    patch.setenv("LETITLOOP_REPLAY", "only")
    item.stash[_REPLAY] = Replay(path)
    item.stash[_UNDO] = patch


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """The environment as it was before the marked test (teardown runs even after a failed
    setup)."""
    patch = item.stash.get(_UNDO, None)
    if patch is not None:
        del item.stash[_UNDO]
        patch.undo()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    replay = item.stash.get(_REPLAY, None)
    if (
        replay is not None
        and call.when == "call"
        and call.excinfo is not None
        and isinstance(call.excinfo.value, (StepMismatchError, UnrecordedStepError))
    ):
        report.longrepr = drift_report(call.excinfo.value, replay.path)  # type: ignore[attr-defined]
    return report


@pytest.fixture
def letitloop_replay(request: pytest.FixtureRequest) -> Replay:
    """The fixture file of the test's ``@pytest.mark.letitloop_replay(path)``."""
    replay = request.node.stash.get(_REPLAY, None)
    if replay is None:
        pytest.fail(
            f"the letitloop_replay fixture needs the marker: "
            f"@pytest.mark.{MARKER}('tests/fixtures/agent.db') on the test",
            pytrace=False,
        )
    return replay  # type: ignore[no-any-return]


@pytest.fixture
def letitloop_clock() -> Iterator[SkippingClock]:
    """A clock that skips, the default of every journal opened in the test without ``clock=``."""
    clock = SkippingClock()
    with using_clock(clock):
        yield clock


@pytest.fixture
def letitloop_crashtest(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``letitloop_crashtest(command, **options)``: the crash test of a program's command.

    ``command`` is a list (``[sys.executable, "pipeline.py"]``), run from the
    test's current folder; ``options`` are ``lil crashtest``'s (``max_kills``,
    ``effects``, ``output``, ...: letitloop.supervision.crashtest.crashtest).
    Fails the test with the report when a step, marker body, paid call or
    side effect ran twice, or a trial did not finish as the reference did;
    returns the report (``Report``: ``tried``, ``reruns``, ``allowed``, ...)
    otherwise. Skips the test unless pytest runs with ``--letitloop-crash``.
    """
    if not request.config.getoption(CRASH_OPTION):
        pytest.skip(f"a crash test: run it with pytest {CRASH_OPTION}")

    def crashtest(command: Sequence[str], **options: Any) -> Any:
        from .supervision.crashtest import crashtest as run_crashtest
        from .supervision.crashtest import describe

        report = run_crashtest(list(command), **options)
        if report.repeats or report.problems:
            pytest.fail("\n".join(describe(report, list(command))), pytrace=False)
        return report

    return crashtest


def drift_report(exc: StepMismatchError | UnrecordedStepError, path: Path) -> str:
    """The failure of a replay test: the step that drifted, and what changed, side by side."""
    key = getattr(exc, "key", None)
    lines = [f"letitloop replay of {path}: step {key!r} drifted from the recording", ""]
    if isinstance(exc, UnrecordedStepError):
        if key is None:
            lines[0] = f"letitloop replay of {path}: no recorded run to replay"
        else:
            lines.append(
                f"  the recording has no step {key!r}: {exc.function} was called there "
                f"(added, renamed, or called in another order) and was not run"
            )
    else:
        lines += _side_by_side(exc)
        if exc.called is not None:
            lines.append("  (the journal keeps a digest of each recorded argument, not its value)")
    lines += [
        "",
        "If the change is intended, record the pipeline again and remake the fixture: "
        f"lil fixture RUN --to {path} --force",
        "",
        str(exc),
    ]
    return "\n".join(lines)


def _side_by_side(exc: StepMismatchError) -> list[str]:
    """The recorded and the new function and arguments in two columns."""
    if exc.called is None:  # recorded, never called (closing.unreplayed)
        return [f"  recorded: {exc.recorded}", "  now:      not called (removed or skipped)"]
    rows = [("", "recorded", "now"), ("function", str(exc.recorded), str(exc.called))]
    recorded = _digests(exc.recorded_fp)
    called = _digests(exc.called_fp)
    shown = exc.arguments or {}
    for name in list(dict.fromkeys([*recorded, *called])):
        old = recorded.get(name)
        new = called.get(name)
        text = shown.get(name, "")
        now = "(not passed)" if new is None else (text or f"digest {new}")
        was = "(not passed)" if old is None else f"digest {old}"
        same = old is not None and new is not None and same_digest(old, new)
        if same:
            was, now = "same", text or "same"
        rows.append((f"argument {name}", was, now + ("" if same else "   <- differs")))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    return [f"  {a:<{width[0]}}  {b:<{width[1]}}  {c}".rstrip() for a, b, c in rows]


def _digests(fp: str | None) -> dict[str, str]:
    """A fingerprint's digests by argument: ``"0"``, ``"1"``, … and ``"name="``."""
    out: dict[str, str] = {}
    position = 0
    for part in (fp or "").split():
        name, eq, digest = part.rpartition("=")
        if eq:
            out[f"{name}="] = digest
        else:
            out[str(position)] = digest
            position += 1
    return out
