"""Journaled DSPy tools: each call of a ``dspy.Tool`` is a step of the open journal.

``journaled_tool(tool)`` returns a ``dspy.Tool`` with the same name,
description and arguments whose calls (``tool(**kw)``, ``await tool.acall(**kw)``,
as ``dspy.ReAct`` makes them) are steps keyed ``dspy.tool:<name>`` (``#2``, …
in call order), the arguments their fingerprint: a call that returned is
replayed, never run again for that run. Outside a journal the tool runs as usual.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import dspy

from ...errors import StepMismatchError
from .lm import open_journal, refused


def journaled_tool(tool: dspy.Tool | Callable[..., Any]) -> dspy.Tool:
    """``tool`` (a ``dspy.Tool`` or a plain function) with each call journaled."""
    if not isinstance(tool, dspy.Tool):
        tool = dspy.Tool(tool)
    func = tool.func
    key = f"dspy.tool:{tool.name}"

    if inspect.iscoroutinefunction(func):

        async def acall(**kwargs: Any) -> Any:
            journal = open_journal()
            if journal is None:
                return await func(**kwargs)
            try:
                return await journal.async_step(key, func, **kwargs)
            except StepMismatchError as error:
                raise refused(error, error.key or key, kwargs) from None

        wrapped: Callable[..., Any] = acall
    else:

        def call(**kwargs: Any) -> Any:
            journal = open_journal()
            if journal is None:
                return func(**kwargs)
            try:
                return journal.step(key, func, **kwargs)
            except StepMismatchError as error:
                raise refused(error, error.key or key, kwargs) from None

        wrapped = call
    return dspy.Tool(
        wrapped,
        name=tool.name,
        desc=tool.desc,
        args=tool.args,
        arg_types=tool.arg_types,
        arg_desc=tool.arg_desc,
    )
