"""TEMPORARY (identity2): the helpers branch identity has in progress in agentcalls.py
(request_options, run_journal_async, agent_mismatch), same names and signatures, until
they are committed there; then this module goes and its users import agentcalls."""

from __future__ import annotations

import contextlib
import json
import shlex
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from letitloop.adapters.agentcalls import (
    DEFAULT_REUSE,
    DEFAULT_TIMEOUT,
    open_journal,
    plain,
    request_run,
)
from letitloop.errors import StepMismatchError
from letitloop.journal import Journal

__all__ = ["Turns", "agent_mismatch", "request_options", "run_journal_async"]


def request_options(
    label: str,
    request: Any,
    conversation: str | None,
    *,
    run: str | None,
    turn: int,
    reuse: float | timedelta | None,
    fresh: bool,
) -> dict[str, Any]:
    """``run=``, ``reuse=`` and ``fresh=`` of the journal of one request of an agent."""
    if run is not None:
        name = run if turn <= 1 else f"{run}.turn{turn}"
        return {"run": name, "reuse": reuse, "fresh": fresh}
    window = DEFAULT_REUSE if reuse is None and not fresh else reuse
    return {"run": request_run(label, request, conversation), "reuse": window, "fresh": fresh}


@contextlib.asynccontextmanager
async def run_journal_async(
    goal: str,
    path: str | None,
    *,
    run: str | None = None,
    reuse: float | timedelta | None = None,
    fresh: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> AsyncIterator[Journal]:
    """:func:`run_journal` for an agent run on an event loop (``async with Journal``)."""
    journal = open_journal()
    if journal is not None:
        yield journal
        return
    async with Journal(
        goal, run=run, path=path, reuse=reuse, fresh=fresh, timeout=timeout
    ) as journal:
        yield journal


MISMATCH_DETAILS = (
    "run_id",
    "key",
    "recorded",
    "called",
    "differences",
    "recorded_fp",
    "called_fp",
    "arguments",
)


def agent_mismatch(
    error: StepMismatchError, agent: str, name: str, identity: Any
) -> StepMismatchError:
    """``error`` as an agent adapter's user reads it: the agent, the call, what differs,
    and the three ways out."""
    journal = open_journal()
    run = getattr(journal, "generation", None) or error.run_id
    goal = journal.goal if journal is not None else "GOAL"
    reset = f"lil reset {shlex.quote(goal)} --run {error.run_id}"
    fork = f"lil fork {error.run_id} --from-step {shlex.quote(error.key or '')}"
    model = isinstance(identity, dict) and "messages" in identity
    if error.recorded != error.called:
        differs = f"recorded by {error.recorded}, now made by {error.called}"
    elif model:
        differs = "its prompt, tools or options differ from the recorded call's"
    else:
        differs = "its arguments differ from the recorded call's"
    return StepMismatchError(
        f"agent {agent!r}: its {describe_call(name, identity)} is not the call recorded at "
        f"this place of run {run!r}: {differs}. The agent's request, its conversation or "
        f"its code changed under a recorded run; nothing was called. Ways out: give the "
        f"request a new run (run='...', or fresh=True for a new answer), reset the run "
        f"({reset}), or fork it before this call ({fork})",
        **{k: getattr(error, k, None) for k in MISMATCH_DETAILS},
    )


def describe_call(name: str, identity: Any) -> str:
    if isinstance(identity, dict) and "messages" in identity:
        messages = identity["messages"]
        last = messages[-1] if isinstance(messages, list) and messages else messages
        prompt = last.get("content") if isinstance(last, dict) else last
        return f"model call {name!r} (prompt ending {excerpt(prompt)!r})"
    return f"call {name!r} with {excerpt(identity)}"


def excerpt(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(plain(value), sort_keys=True)
    return text if len(text) <= limit else "…" + text[-limit:]


class Turns:
    """How many requests an entry point made in this process, counted from 1 (names
    ``run=``'s later turns: ``{run}.turn2``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def next(self) -> int:
        with self._lock:
            self._count += 1
            return self._count
