"""``lil check``: would the unfinished runs resume under the code as it is now?

:func:`check` finds the ``@durable``/``@durable_async`` functions of a module
(or one of them), copies the journal file, and replays each unfinished run of
their goals (running, crashed, failed or waiting; not cancelled) against the
current code in replay-only mode, on the copy: every recorded step replays,
no step function is called, nothing is written to the journal. A run's
replay ends at the first step its recording lacks (:class:`UnrecordedStepError`:
the run resumes cleanly up to there and runs the rest fresh), at a step whose
recording does not match the call (:class:`StepMismatchError`: the run would
stop there), or when the function returns (every step it calls is recorded).
Patch decisions the replay takes are reported: a run that takes the old path
of ``patched(P)`` still needs that path in the code (docs/versioning.md).

Code between steps runs, as in any resume (what it prints goes to stderr
under ``lil check``). A durable call made while the module is imported (a
script's ``print(sync(123))``) runs replay-only on the copy too; if it
raises, the functions defined before it are checked all the same.

Here: the report (:class:`RunCheck`, :class:`CheckReport`), one run's replay
(:func:`replay_run`) and :func:`check`; the target is found by
``deploycheck_target.py``, the copy made and read by ``deploycheck_copy.py``.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import codec
from ..errors import (
    DamagedRowError,
    DecodeError,
    LetItLoopError,
    PatchDeprecatedError,
    StepMismatchError,
    UnrecordedStepError,
    error_text,
)
from ..primitives import patches
from ..run.decoration import Durable
from ..run.journal import Journal
from ..stores.schemes import scheme_of
from ..stores.sqlite.files import resolve_path
from .journalcopy import CHECK_NAME, copy_journal, recorded_patches, unfinished_runs
from .target import durable_functions, load_target


@dataclass(frozen=True)
class RunCheck:
    """What a replay of one unfinished run under the current code found."""

    goal: str
    run_id: str
    name: str | None
    #: The durable function replayed (``module.qualname``).
    function: str
    #: ``completes`` (every step it calls is recorded), ``resumes`` (it replays up to
    #: ``key``, the first step its recording lacks, which would run fresh), ``stops`` (at
    #: ``key`` the recording does not match the call: the run would stand there), or
    #: ``fails`` (the code raised something else during the replay).
    outcome: str
    key: str | None
    #: What differs, or what was raised; for ``resumes``, the recorded steps not met yet.
    detail: str
    #: Steps replayed before it ended.
    replayed: int
    #: Patches the run takes the old path of (decision False), in the order met.
    old_patches: tuple[str, ...] = ()
    #: Patches the run takes the new path of.
    new_patches: tuple[str, ...] = ()
    #: Recorded steps the replay had not met when it ended (``resumes``, ``completes``).
    unmet: tuple[str, ...] = field(default=())

    @property
    def strands(self) -> bool:
        """Whether the run would not go on under this code (``stops`` or ``fails``)."""
        return self.outcome in ("stops", "fails")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "strands": self.strands}


@dataclass(frozen=True)
class CheckReport:
    """The runs checked, the journal they were read from, and how long the check took."""

    journal: Path
    runs: list[RunCheck]
    functions: list[str]
    #: What importing the module raised (a durable call at import), if anything.
    import_error: str | None = None
    seconds: float = 0.0

    @property
    def strands(self) -> bool:
        return any(r.strands for r in self.runs)

    def old_path_runs(self, patch: str) -> list[RunCheck]:
        """The runs that take the old path of ``patch`` (deprecating it would stop them)."""
        return [r for r in self.runs if patch in r.old_patches]


def call_arguments(info: Durable, input_text: str | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments the run was called with, rebuilt from its recorded input."""
    import inspect

    if input_text is None:
        return (), {}
    arguments = codec.decode(input_text, info.registry)
    if not isinstance(arguments, dict):
        raise LetItLoopError(f"expected the run's input to be its arguments, got {input_text}")
    bound = inspect.BoundArguments(info.signature, arguments)
    return bound.args, bound.kwargs


def replay_run(
    info: Durable,
    copy: Path,
    run: tuple[str, str | None, str | None],
    recorded: Sequence[tuple[str, bool]] = (),
) -> RunCheck:
    """Replay one run of ``info``'s goal on ``copy`` under the current code (see the module).

    ``recorded`` are the patch decisions the run recorded: one it records as the
    old path counts even when the replay stops before meeting it again.
    """
    run_id, name, input_text = run
    qualname = f"{info.fn.__module__}.{info.fn.__qualname__}"
    journal = Journal(
        info.goal,
        run=CHECK_NAME + run_id,
        path=copy,
        registry=info.registry,
        replay_only=True,
        version=info.version,
    )
    decisions: list[tuple[str, bool]] = []
    token = patches.decisions.set(decisions)
    outcome, key, detail = "completes", None, ""
    try:
        args, kwargs = call_arguments(info, input_text)
        if info.is_async:
            asyncio.run(_replay_async(journal, info.fn, args, kwargs))
        else:
            with journal:
                info.fn(*args, **kwargs)
    except UnrecordedStepError as exc:
        outcome, key, detail = "resumes", exc.key, f"{exc.key} ({exc.function}) runs fresh"
    except StepMismatchError as exc:
        outcome, key, detail = "stops", exc.key, _mismatch(exc)
    except (PatchDeprecatedError, DamagedRowError, DecodeError) as exc:
        outcome, key, detail = "stops", getattr(exc, "key", None), error_text(exc)
    except Exception as exc:
        outcome, detail = "fails", error_text(exc)
    finally:
        patches.decisions.reset(token)
    keys = journal._opened.keys
    unmet = tuple(k for k in keys.recorded if k not in keys.claimed)
    # The key it stopped at may be taken (its recording found, then refused): not replayed.
    replayed = sum(1 for k in keys.claimed if k in keys.recorded and k != key)
    return RunCheck(
        goal=info.goal,
        run_id=run_id,
        name=name,
        function=qualname,
        outcome=outcome,
        key=key,
        detail=detail,
        replayed=replayed,
        old_patches=_names(n for n, d in [*recorded, *decisions] if not d),
        new_patches=_names(n for n, d in decisions if d),
        unmet=unmet,
    )


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


async def _replay_async(
    journal: Journal, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    async with journal:
        await fn(*args, **kwargs)


def _mismatch(exc: StepMismatchError) -> str:
    if exc.recorded and exc.called and exc.recorded != exc.called:
        return f"recorded by {exc.recorded}, now called with {exc.called}"
    if exc.differences:
        return f"called with other arguments: {exc.differences}"
    return error_text(exc)


@contextmanager
def _replaying(copy: Path) -> Iterator[None]:
    """Every journal this process opens meanwhile is replay-only on ``copy``."""
    saved = {k: os.environ.get(k) for k in ("LETITLOOP_REPLAY", "LETITLOOP_DB")}
    os.environ["LETITLOOP_REPLAY"] = "only"
    os.environ["LETITLOOP_DB"] = str(copy)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def check(target: str, path: str | os.PathLike[str] | None = None) -> CheckReport:
    """Replay every unfinished run of ``target``'s durable functions under the current code.

    ``target`` is ``MODULE[:FUNCTION]`` (a dotted module name importable from
    the current folder, or a ``.py`` file, imported as ``__main__``). ``path``
    is the journal file (default: the decorator's ``path=``, else
    ``LETITLOOP_DB``, else the journal the program finds by itself: for a
    ``.py`` file, as a script run from anywhere; letitloop/stores/discovery.py). The journal
    is copied first and only the copy is opened, replay-only (the module's
    import too); no step function is called. Raises LetItLoopError for a
    target with no durable function, or a journal that is not a file.
    """
    started = time.perf_counter()
    default = resolve_path(path)
    script = target.split(":")[0]
    if path is None and not os.environ.get("LETITLOOP_DB") and script.endswith(".py"):
        from ..stores.discovery import default_path  # the journal the file finds, run as a script

        default = resolve_path(default_path(script=script))
    with tempfile.TemporaryDirectory(prefix="lil-check-") as tmp:
        folder = Path(tmp)
        copies: dict[Path, Path] = {}

        def copy_of(where: Path) -> Path | None:
            if where not in copies:
                if not where.exists():
                    return None  # no journal yet: no run to check
                copies[where] = copy_journal(where, folder / str(len(copies)))
            return copies[where]

        with _replaying(copy_of(default) or folder / "none.db"):
            module, function, import_error = load_target(target)
        functions = durable_functions(module, function)
        if not functions:
            raise LetItLoopError(
                f"{module.__name__} has no @durable or @durable_async function; lil check "
                f"replays their runs (decorate the function, or name a module that has one)"
            )
        results: list[RunCheck] = []
        journals: list[Path] = []
        for info in functions:
            where = default if path is not None or info.path is None else _journal_of(info)
            journals.append(where)
            copy = copy_of(where)
            if copy is None:
                continue
            with _replaying(copy):
                runs = unfinished_runs(copy, info.goal)
                decided = recorded_patches(copy, info.goal) if runs else {}
                for run in runs:
                    results.append(replay_run(info, copy, run, decided.get(run[0], [])))
        return CheckReport(
            journal=journals[0],
            runs=results,
            functions=[f"{i.fn.__module__}.{i.fn.__qualname__}" for i in functions],
            import_error=import_error,
            seconds=time.perf_counter() - started,
        )


def _journal_of(info: Durable) -> Path:
    if info.path is not None and scheme_of(info.path) is not None:
        raise LetItLoopError(
            f"lil check replays runs of a journal file; {info.fn.__qualname__} journals in "
            f"{info.path}: copy its runs into a file first"
        )
    return resolve_path(info.path)
