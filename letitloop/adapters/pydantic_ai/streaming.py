"""A durable agent's streamed model requests journaled token by token (``letitloop.streams``).

Pydantic AI runs a streamed model request (``run_stream``, ``run_stream_events``,
``iter``) as one durable unit that consumes the model's stream. Inside that unit
the capability's model wrapper (:class:`JournaledStreamModel`, from
``get_wrapper_model``) makes the stream a ``letitloop.streams`` step keyed under
the unit's step: each text and tool call delta is journaled as a chunk as it
arrives (readers follow it: ``lil show --follow``, ``letitloop.streams.follow``)
and handed on to Pydantic AI as the same events. After a kill mid-stream the
unit runs again and the stream recovers:

- ``"continue"``: the same request with the journaled text as the model's own
  response to go on from (a last ``ModelResponse`` holding a ``TextPart``):
  what OpenAI-compatible servers that complete a last assistant message do.
  Only with text journaled and no tool call begun; else a restart.
- ``"restart"``: the request again, after a ``reset`` chunk readers see.

The model's name, finish reason, response id and usage are journaled at the
stream's end (a ``state`` chunk): the unit's response carries them, and the
unit records the usage once (units.py). Thinking parts and the provider's own
(native) tool parts are not journaled: a journaled streamed response is its
text and its tool calls.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic_ai import _utils
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ModelResponseStreamEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RequestUsage

from ...errors import MisuseError
from ...identity.step_names import Named
from ...streams import AsyncStream, Piece, Recovery, Resume, astream

__all__ = ["RECOVERIES", "JournaledStreamModel", "in_stream_unit", "recovery_of"]

#: What a durable agent does with a streamed model request cut by a kill.
RECOVERIES = ("auto", "continue", "restart")

#: True inside the step of a streamed model request unit of a durable agent run
#: (units.py sets it): the model wrapper journals the stream only there.
in_stream_unit: ContextVar[bool] = ContextVar("letitloop_pydantic_ai_stream_unit", default=False)


def recovery_of(value: str) -> str:
    """``value`` checked as a ``stream_recovery``: MisuseError naming the choices."""
    if value not in RECOVERIES:
        raise MisuseError(
            f"LetItLoopDurability(stream_recovery={value!r}): expected one of "
            f"{', '.join(map(repr, RECOVERIES))} ('auto': continue an OpenAI-compatible chat "
            f"model's answer from the journaled prefix, restart any other)"
        )
    return value


def _continues(model: Model) -> bool:
    """``auto``: an OpenAI-compatible chat completions model (it completes a last
    assistant message, as ``letitloop.adapters.openai.stream_chat`` relies on)."""
    while isinstance(model, WrapperModel):
        model = model.wrapped
    try:
        from pydantic_ai.models.openai import OpenAIChatModel
    except ImportError:  # pragma: no cover - openai not installed
        return False
    return isinstance(model, OpenAIChatModel)


def _pieces(event: ModelResponseStreamEvent) -> list[Piece | str]:
    """The pieces of one of the model's stream events: its text and tool call deltas."""
    if isinstance(event, PartStartEvent):
        part = event.part
        if isinstance(part, TextPart):
            return [part.content] if part.content else []
        if isinstance(part, ToolCallPart):
            args = part.args if isinstance(part.args, str) else part.args_as_json_str()
            return [Piece.tool(event.index, args or "", id=part.tool_call_id, name=part.tool_name)]
    elif isinstance(event, PartDeltaEvent):
        delta = event.delta
        if isinstance(delta, TextPartDelta):
            return [delta.content_delta] if delta.content_delta else []
        if isinstance(delta, ToolCallPartDelta):
            more = delta.args_delta
            text = more if isinstance(more, str) else json.dumps(more) if more else ""
            return [
                Piece.tool(event.index, text, id=delta.tool_call_id, name=delta.tool_name_delta)
            ]
    return []


async def _source(
    model: Model,
    messages: list[ModelMessage],
    settings: ModelSettings | None,
    parameters: ModelRequestParameters,
    run_context: RunContext[Any] | None,
) -> AsyncIterator[Piece | str]:
    async with model.request_stream(messages, settings, parameters, run_context) as streamed:
        async for event in streamed:
            for piece in _pieces(event):
                yield piece
        spent = streamed.usage
        yield Piece.state(
            model_name=streamed.model_name,
            provider_name=streamed.provider_name,
            provider_response_id=streamed.provider_response_id,
            finish_reason=streamed.finish_reason,
            usage={"input_tokens": spent.input_tokens, "output_tokens": spent.output_tokens},
        )


def _continued(
    recovery: str,
    model: Model,
    messages: list[ModelMessage],
    settings: ModelSettings | None,
    parameters: ModelRequestParameters,
    run_context: RunContext[Any] | None,
) -> Any:
    """The stream's ``recover`` hook: ``continue`` (the answer so far as the model's own
    response to go on from) or None (restart)."""

    def recover(resume: Resume) -> Recovery | None:
        if recovery == "restart" or (recovery == "auto" and not _continues(model)):
            return None
        if not resume.text or resume.tool_calls or resume.partial_tools:
            return None
        prefix = ModelResponse(parts=[TextPart(resume.text)])
        pieces = _source(model, [*messages, prefix], settings, parameters, run_context)
        return Recovery("continue", pieces)

    return recover


@dataclass
class JournaledStreamedResponse(StreamedResponse):
    """The model's stream as Pydantic AI reads it, made of the journaled chunks."""

    _stream: AsyncStream = field(kw_only=True)
    _model_name: str = field(kw_only=True)
    _provider_name: str | None = field(kw_only=True, default=None)
    _timestamp: datetime = field(kw_only=True, default_factory=_utils.now_utc)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        async for chunk in self._stream:
            if chunk.kind == "text":
                for event in self._parts_manager.handle_text_delta(
                    vendor_part_id=None, content=chunk.text
                ):
                    yield event
            elif chunk.kind == "tool":
                delta = chunk.value
                for event in self._parts_manager.handle_tool_call_delta_events(
                    vendor_part_id=("tool", delta["index"]),
                    tool_name=delta.get("name"),
                    args=delta.get("arguments") or None,
                    tool_call_id=delta.get("id"),
                ):
                    yield event
        state = (await self._stream.answer()).state
        self._model_name = state.get("model_name") or self._model_name
        self._provider_name = state.get("provider_name") or self._provider_name
        self.provider_response_id = state.get("provider_response_id")
        self.finish_reason = state.get("finish_reason")
        spent = state.get("usage") or {}
        self._usage = RequestUsage(
            input_tokens=int(spent.get("input_tokens") or 0),
            output_tokens=int(spent.get("output_tokens") or 0),
        )

    async def close_stream(self) -> None:
        pass

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def provider_name(self) -> str | None:
        return self._provider_name

    @property
    def provider_url(self) -> str | None:
        return None

    @property
    def timestamp(self) -> datetime:
        return self._timestamp


class JournaledStreamModel(WrapperModel):
    """The model that serves a durable agent's requests: as the wrapped one, but a streamed
    request inside a durable unit is a ``letitloop.streams`` step (its chunks journaled)."""

    def __init__(self, wrapped: Model, recovery: str) -> None:
        super().__init__(wrapped)
        self.recovery = recovery

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        if not in_stream_unit.get():
            async with self.wrapped.request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as streamed:
                yield streamed
            return
        # The request is the unit's (its key): the stream step takes no arguments.
        request = (self.wrapped, messages, model_settings, model_request_parameters, run_context)
        s = astream(
            "response",
            Named("letitloop:pydantic_ai.stream", lambda: _source(*request)),
            recover=_continued(self.recovery, *request),
        )
        yield JournaledStreamedResponse(
            model_request_parameters,
            _stream=s,
            _model_name=self.wrapped.model_name,
            _provider_name=self.wrapped.system,
        )
