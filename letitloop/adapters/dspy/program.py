"""``durable_program``: each call of a DSPy program is a journal run, named by its request.

``agent = durable_program(dspy.ReAct(...))`` wraps the program's ``forward``
and ``aforward`` in place: ``agent(question=...)`` (``await
agent.acall(...)``) runs inside a journal run of goal ``goal`` (default: the
program's class name). With no ``run=``, the run's name is the request
itself: the program's inputs, so the same inputs are the same run (a rerun
after a kill resumes it; once it completed it is replayed, its LM and tool
calls handed back without a call, for ``reuse`` seconds) and other inputs
(another question, a conversation's next turn: its ``dspy.History`` holds the
turns before) are a run of their own. A second copy of the same request waits
for the first and replays it. Inside an open journal (``with Journal(...)``,
``@durable``) the program's calls go to that journal's run instead.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from types import MethodType
from typing import Any

import dspy
from pydantic import BaseModel

from .._identity_stub import request_run, run_journal2


def request_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A program call's inputs as plain data: a pydantic value (``dspy.History``,
    ``dspy.Image``) as its type's name and its fields, never its module's path."""

    def plain_inputs(value: Any) -> Any:
        if isinstance(value, BaseModel):
            return {type(value).__name__: value.model_dump(mode="json")}
        if isinstance(value, dict):
            return {str(k): plain_inputs(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain_inputs(v) for v in value]
        return value

    return {"args": plain_inputs(list(args)), "kwargs": plain_inputs(kwargs)}


def durable_program(
    program: dspy.Module,
    goal: str | None = None,
    *,
    run: str | None = None,
    reuse: float | timedelta | None = None,
    fresh: bool = False,
    path: str | None = None,
) -> dspy.Module:
    """Make each call of ``program`` a journal run (in place; returns it). See the module."""
    label = goal or type(program).__name__

    def opened(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        name = run if run is not None else request_run(label, request_of(args, kwargs))
        return run_journal2(label, path, run=name, reuse=reuse, fresh=fresh)

    # Read past dspy.Module.__getattribute__, which warns of a forward not called by __call__.
    forward: Callable[..., Any] = vars(program).get("forward") or MethodType(
        type(program).forward, program
    )
    aforward: Callable[..., Any] = vars(program).get("aforward") or MethodType(
        type(program).aforward, program
    )

    def journaled_forward(*args: Any, **kwargs: Any) -> Any:
        with opened(args, kwargs):
            return forward(*args, **kwargs)

    async def journaled_aforward(*args: Any, **kwargs: Any) -> Any:
        with opened(args, kwargs):
            return await aforward(*args, **kwargs)

    program.forward = journaled_forward
    program.aforward = journaled_aforward
    return program
