"""``durable_program``: each call of a DSPy program is a journal run, named by its request.

``agent = durable_program(dspy.ReAct(...))`` wraps the program's ``forward``
and ``aforward`` in place, so ``agent(question=...)`` (``await
agent.acall(...)``) runs inside a journal run of goal ``goal`` (default: the
program's class name), its LM calls (``JournaledLM``) and tool calls
(``journaled_tool``) steps of that run.

Which run: with no ``run=``, the request itself: the program's inputs
(a ``dspy.History`` among them holds the turns of the conversation it
continues) and the program's own prompts (``dump_state()``: signatures,
instructions, demos), so the same request is the same run and a new
question, a conversation's next turn or an edited program is a run of its
own, never a StepMismatchError. A completed request asked again within
``reuse`` seconds (default: the adapters' window, an hour) is replayed: its
LM and tool calls come back without a call; ``fresh=True`` asks for a new
answer. A second copy of a request in flight waits for the first, then
replays it. ``run="trip"`` names the first call's run, ``trip.turn2`` the
second's (in call order in the process), replayed whenever asked, as
``Journal``'s named runs are. Inside an open journal (``with Journal(...)``,
``@durable``) the program's calls go to that journal's run instead.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from types import MethodType
from typing import Any

import dspy
from pydantic import BaseModel

from ...run.generations import reuse_seconds
from ..agentcalls import DEFAULT_TIMEOUT, request_options, run_journal, run_journal_async
from .lm import current_program

#: The attribute a durable program keeps its own ``forward`` and ``aforward`` in.
UNWRAPPED = "_letitloop_unwrapped"


def plain_inputs(value: Any) -> Any:
    """A program's input as plain data: a pydantic value (``dspy.History``,
    ``dspy.Image``) as its type's name and its fields, never its module's path."""
    if isinstance(value, BaseModel):
        return {type(value).__name__: value.model_dump(mode="json")}
    if isinstance(value, dict):
        return {str(k): plain_inputs(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_inputs(v) for v in value]
    return value


def request_of(program: dspy.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What one call of ``program`` asks, as plain data: its prompts and its inputs."""
    return {
        "program": program.dump_state(),
        "args": plain_inputs(list(args)),
        "kwargs": plain_inputs(kwargs),
    }


def durable_program(
    program: dspy.Module,
    goal: str | None = None,
    *,
    run: str | None = None,
    reuse: float | timedelta | None = None,
    fresh: bool = False,
    path: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> dspy.Module:
    """Make each call of ``program`` a journal run (in place; returns it). See the module.

    ``path``: the journal file (default ``$LETITLOOP_DB``, else
    ``.letitloop/journal.db``); ``timeout``: how long a second copy of a
    request waits for the process running it (default: as long as it lives).
    """
    reuse_seconds(reuse, fresh)  # refused here, not at the first call
    label = goal or type(program).__name__
    # The program's calls in this process, counted from 1 (itertools.count's next is
    # atomic under the GIL): run="trip" names the second trip.turn2.
    turns = itertools.count(1)

    def options(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        request = request_of(program, args, kwargs)
        opts = request_options(
            label, request, None, run=run, turn=next(turns), reuse=reuse, fresh=fresh
        )
        return {**opts, "timeout": timeout}

    # The program's own methods, read past dspy.Module.__getattribute__ (it warns of a
    # forward not called by __call__); a program wrapped again is wrapped anew.
    forward, aforward = vars(program).get(UNWRAPPED) or (
        MethodType(type(program).forward, program),
        MethodType(type(program).aforward, program),
    )
    setattr(program, UNWRAPPED, (forward, aforward))

    def journaled_forward(*args: Any, **kwargs: Any) -> Any:
        with run_journal(label, path, **options(args, kwargs)):
            token = current_program.set(label)
            try:
                return forward(*args, **kwargs)
            finally:
                current_program.reset(token)

    async def journaled_aforward(*args: Any, **kwargs: Any) -> Any:
        async with run_journal_async(label, path, **options(args, kwargs)):
            token = current_program.set(label)
            try:
                return await aforward(*args, **kwargs)
            finally:
                current_program.reset(token)

    program.forward = journaled_forward
    program.aforward = journaled_aforward
    return program
