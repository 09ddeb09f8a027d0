"""``Runner.run_streamed`` with a durable agent: each streamed model turn a streamed step.

``DurableModel.stream_response`` (model.py) hands the turn to :func:`turn_events`:
a streamed step keyed ``{label}.model:{n}`` (the count ``get_response`` uses)
whose source is the wrapped model's own ``stream_response``. Its text deltas
and function call deltas are journaled as chunks as they arrive (readers follow
them: ``lil show --follow``, ``letitloop.streams.follow``); the provider's
final response is journaled whole at the end (a ``state`` chunk), with its
usage recorded on the step once. The SDK gets the events the journal hands out
(``response.output_text.delta``, ``response.function_call_arguments.delta``) and
a last ``response.completed``, which is all its ``Runner`` reads.

After a kill mid-turn the rerun replays the finished turns and tool calls
(tools are steps of their own, tools.py) and the cut turn recovers:

- ``OpenAIChatCompletionsModel`` (any OpenAI-compatible chat completions server):
  **continued** from the journaled text (the same input, then the answer so far as
  the assistant's message to be completed); the turn's response is then rebuilt
  from the journal: the whole text, the tool calls, the continuation's usage.
- any other model (the Responses API model: the SDK asks for no background
  response, so there is none to re-attach to): **restarted**, after a ``reset``
  chunk readers see.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agents.items import TResponseStreamEvent
from agents.models.interface import Model
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
)

from letitloop.adapters.agentcalls import Pricing
from letitloop.identity.step_names import Named
from letitloop.run.journal import Journal
from letitloop.streams import AsyncStream, Piece, Recovery, Resume, StreamResult, astream

__all__ = ["turn_events", "turn_stream"]


def _continues(model: Model) -> bool:
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel

    return isinstance(model, OpenAIChatCompletionsModel)


async def _source(
    model: Model, args: tuple[Any, ...], kwargs: dict[str, Any], cost: Pricing | None
) -> AsyncIterator[Piece | str]:
    """The pieces of the wrapped model's streamed turn, its final response last."""
    async for event in model.stream_response(*args, **kwargs):
        if isinstance(event, ResponseTextDeltaEvent):
            if event.delta:
                yield event.delta
        elif isinstance(event, ResponseOutputItemAddedEvent):
            item = event.item
            if isinstance(item, ResponseFunctionToolCall):
                yield Piece.tool(
                    event.output_index, item.arguments or "", id=item.call_id, name=item.name
                )
        elif isinstance(event, ResponseFunctionCallArgumentsDeltaEvent):
            if event.delta:
                yield Piece.tool(event.output_index, event.delta)
        elif isinstance(event, ResponseCompletedEvent):
            response = event.response
            spent = response.usage
            if spent is not None:
                name = getattr(model, "model", None)
                name = name if isinstance(name, str) and name else None
                tokens_in, tokens_out = spent.input_tokens, spent.output_tokens
                price = None if cost is None else cost(name, tokens_in, tokens_out)
                yield Piece.usage(
                    input_tokens=tokens_in, output_tokens=tokens_out, model=name, cost=price
                )
            yield Piece.state(response=response.model_dump(mode="json"))


def _recoverer(
    model: Model, args: tuple[Any, ...], kwargs: dict[str, Any], cost: Pricing | None
) -> Any:
    def recover(resume: Resume, identity: str) -> Recovery | None:
        if not _continues(model) or not resume.text or resume.tool_calls or resume.partial_tools:
            return None
        asked = args[1]
        items = [{"role": "user", "content": asked}] if isinstance(asked, str) else list(asked)
        items.append({"role": "assistant", "content": resume.text})
        again = (*args[:1], items, *args[2:])
        return Recovery("continue", _source(model, again, kwargs, cost))

    return recover


def turn_stream(
    journal: Journal,
    key: str,
    identity: str,
    model: Model,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    cost: Pricing | None,
) -> AsyncStream:
    """The streamed step of one model turn (its identity: the turn's digest)."""
    return astream(
        key,
        Named(
            "letitloop:openai_agents.stream", lambda identity: _source(model, args, kwargs, cost)
        ),
        identity,
        recover=_recoverer(model, args, kwargs, cost),
        journal=journal,
    )


def response_of(result: StreamResult) -> Response:
    """The turn's final response: the provider's own when the turn was not cut, else
    rebuilt from the journal (the whole text, the tool calls, the last call's usage);
    rebuilt too when the provider's holds no output (servers that send their items in
    ``output_item.done`` events only, which the SDK would have collected)."""
    last = dict(result.state.get("response") or {})
    if last.get("output") and not result.recoveries:
        # Built as the openai client builds what a server sent (``construct``: nested
        # models, no validation): an OpenAI-compatible server may leave fields out.
        return Response.construct(**last)
    output: list[Any] = []
    if result.text:
        text = ResponseOutputText(type="output_text", text=result.text, annotations=[])
        output.append(
            ResponseOutputMessage(
                id=f"msg_{uuid.uuid4().hex[:12]}",
                type="message",
                role="assistant",
                status="completed",
                content=[text],
            )
        )
    for call in result.tool_calls:
        output.append(
            ResponseFunctionToolCall(
                type="function_call",
                call_id=str(call.get("id") or ""),
                name=str(call.get("name") or ""),
                arguments=str(call.get("arguments") or ""),
            )
        )
    base: dict[str, Any] = {
        "id": f"resp_{uuid.uuid4().hex[:12]}",
        "created_at": 0,
        "model": "",
        "object": "response",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    return Response.construct(**{**base, **last, "output": [o.model_dump() for o in output]})


async def turn_events(stream: AsyncStream) -> AsyncIterator[TResponseStreamEvent]:
    """The events the SDK's ``Runner`` reads, from the chunks the step hands out."""
    seq = 0
    async for chunk in stream:
        if chunk.kind == "text":
            yield ResponseTextDeltaEvent(
                type="response.output_text.delta",
                delta=chunk.text,
                item_id="",
                output_index=0,
                content_index=0,
                logprobs=[],
                sequence_number=seq,
            )
        elif chunk.kind == "tool":
            delta = json.loads(chunk.data)
            yield ResponseFunctionCallArgumentsDeltaEvent(
                type="response.function_call_arguments.delta",
                delta=delta.get("arguments") or "",
                item_id=str(delta.get("id") or ""),
                output_index=int(delta["index"]),
                sequence_number=seq,
            )
        seq += 1
    response = response_of(await stream.answer())
    yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=seq)
