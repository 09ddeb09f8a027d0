"""TEMPORARY (identity2 groundwork): stands in for the core's API of branch identity."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Iterator
from typing import Any

from letitloop.adapters.agentcalls import digest, open_journal
from letitloop.errors import StepMismatchError
from letitloop.journal import Journal

DEFAULT_REUSE = 3600.0
DEFAULT_TIMEOUT = math.inf


def request_run(label: str, request: Any, conversation: str | None = None) -> str:
    return f"{label}.request:{digest({'request': request, 'after': conversation})}"


def request_options(
    label: str,
    request: Any,
    conversation: str | None,
    *,
    run: str | None,
    turn: int,
    reuse: Any,
    fresh: bool,
) -> dict[str, Any]:
    if run is not None:
        name = run if turn <= 1 else f"{run}.turn{turn}"
        return {"run": name, "reuse": reuse, "fresh": fresh}
    window = DEFAULT_REUSE if reuse is None and not fresh else reuse
    return {"run": request_run(label, request, conversation), "reuse": window, "fresh": fresh}


@contextlib.contextmanager
def run_journal(
    goal: str,
    path: str | None,
    *,
    run: str | None = None,
    reuse: Any = None,
    fresh: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> Iterator[Journal]:
    journal = open_journal()
    if journal is not None:
        yield journal
        return
    with Journal(goal, path=path, run=run, timeout=timeout) as journal:
        yield journal


@contextlib.asynccontextmanager
async def run_journal_async(
    goal: str,
    path: str | None,
    *,
    run: str | None = None,
    reuse: Any = None,
    fresh: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> AsyncIterator[Journal]:
    journal = open_journal()
    if journal is not None:
        yield journal
        return
    async with Journal(goal, path=path, run=run, timeout=timeout) as journal:
        yield journal


def agent_mismatch(
    error: StepMismatchError, agent: str, name: str, identity: Any
) -> StepMismatchError:
    return StepMismatchError(f"agent {agent!r}: {name} {identity}: {error}")
