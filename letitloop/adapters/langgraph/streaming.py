"""A durable model's streamed calls (``stream_mode="messages"``) journaled token by token.

LangChain streams a chat model's call when something listens for its tokens
(LangGraph's ``stream_mode="messages"``, ``astream_events``, ``model.stream``):
it calls the model's ``_stream`` instead of ``_generate``. :class:`StreamingChatModel`
(what ``durable_model`` returns) gives the durable model a ``_stream`` and an
``_astream``: inside a durable node (a journal open) the call is a
``letitloop.streams`` step keyed as its non-streamed call would be (``model``,
``model#2``, …): each text and tool call delta is journaled as a chunk as it
arrives (readers follow it: ``lil show --follow``, ``letitloop.streams.follow``)
and handed on to LangChain, hence to LangGraph's ``messages`` stream. After a
kill mid-stream the node runs again, replays its finished steps, and the cut
call recovers:

- ``stream_recovery="continue"`` (``"auto"`` for LangChain's OpenAI chat models,
  ``langchain_openai.BaseChatOpenAI``): the same messages, then the journaled text as
  an ``AIMessage`` for the model to go on from (what OpenAI-compatible servers that
  complete a last assistant message do); only with text journaled and no tool call
  begun, else a restart.
- ``"restart"`` (``"auto"`` for any other model): the call again, after a ``reset``
  chunk readers see.

Outside a durable node (the model node of ``create_react_agent``, a plain node
function) the call is journaled whole by the run it opens (``prebuilt.py``) and
handed to LangChain as one chunk: no token-by-token stream there.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult

from ...errors import MisuseError
from ...identity.step_names import Named
from ...run.journal import current_journal
from ...streams import Piece, Recovery, Resume, StreamResult, astream, stream
from ..reserving import chat_prompt, max_tokens_of, reserve_call
from .prebuilt import DurableChatModel, call_identity, make_durable_model, model_name

__all__ = ["RECOVERIES", "StreamingChatModel", "streaming_model"]

#: What a durable model's streamed call cut by a kill does on the next attempt.
RECOVERIES = ("auto", "continue", "restart")


def recovery_of(value: str) -> str:
    """``value`` checked as a ``stream_recovery``: MisuseError naming the choices."""
    if value not in RECOVERIES:
        raise MisuseError(
            f"durable_model(stream_recovery={value!r}): expected one of "
            f"{', '.join(map(repr, RECOVERIES))} ('auto': continue an OpenAI chat model's "
            f"answer from the journaled prefix, restart any other)"
        )
    return value


def _continues(model: BaseChatModel, recovery: str) -> bool:
    if recovery != "auto":
        return recovery == "continue"
    try:
        openai_chat = importlib.import_module("langchain_openai.chat_models.base")
    except ImportError:  # langchain-openai not installed: no such model
        return False
    return isinstance(model, openai_chat.BaseChatOpenAI)


class _Pieces:
    """A model's chunks as pieces; its usage and response metadata, for the last piece."""

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model
        self.metadata: dict[str, Any] = {}
        self.usage: dict[str, Any] | None = None

    def of(self, chunk: ChatGenerationChunk) -> Iterator[Piece | str]:
        message = chunk.message
        if isinstance(message.content, str):
            if message.content:
                yield message.content
        else:
            for block in message.content:
                if isinstance(block, dict) and block.get("type") == "text" and block.get("text"):
                    yield str(block["text"])
        for call in getattr(message, "tool_call_chunks", None) or ():
            index = call.get("index")
            yield Piece.tool(
                int(index) if index is not None else 0,
                call.get("args") or "",
                id=call.get("id"),
                name=call.get("name"),
            )
        self.metadata.update(message.response_metadata or {})
        spent = getattr(message, "usage_metadata", None)
        if spent:
            self.usage = dict(spent)
            yield Piece.usage(
                input_tokens=spent.get("input_tokens"),
                output_tokens=spent.get("output_tokens"),
                model=model_name(self.model),
            )

    def last(self) -> Piece:
        """What the message's last chunk carries: its response metadata and usage."""
        return Piece.state(response_metadata=self.metadata, usage_metadata=self.usage)


def _reserve(model: BaseChatModel, messages: list[BaseMessage], kwargs: dict[str, Any]) -> None:
    """Reserve the call in its run's budget, if any, before it is made (as ``model_call``)."""
    prompt = functools.partial(chat_prompt, messages, kwargs.get("tools"))
    reserve_call(prompt, lambda: max_tokens_of(kwargs, model), model_name(model), None)


def _source(
    model: BaseChatModel, messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any]
) -> Iterator[Piece | str]:
    _reserve(model, messages, kwargs)
    pieces = _Pieces(model)
    for chunk in model._stream(messages, stop=stop, **kwargs):
        yield from pieces.of(chunk)
    yield pieces.last()


async def _asource(
    model: BaseChatModel, messages: list[BaseMessage], stop: Any, kwargs: dict[str, Any]
) -> AsyncIterator[Piece | str]:
    _reserve(model, messages, kwargs)
    pieces = _Pieces(model)
    async for chunk in model._astream(messages, stop=stop, **kwargs):
        for piece in pieces.of(chunk):
            yield piece
    yield pieces.last()


def _continued(resume: Resume, messages: list[BaseMessage]) -> list[BaseMessage] | None:
    """The messages that ask for the rest of ``resume``'s answer, or None (restart)."""
    if not resume.text or resume.tool_calls or resume.partial_tools:
        return None
    return [*messages, AIMessage(content=resume.text)]


def _chunk(chunk: Any) -> ChatGenerationChunk:
    """A journaled chunk as LangChain's: a text delta or a tool call's."""
    if chunk.kind == "text":
        return ChatGenerationChunk(message=AIMessageChunk(content=chunk.text))
    delta = chunk.value
    call = tool_call_chunk(
        index=delta["index"],
        id=delta.get("id"),
        name=delta.get("name"),
        args=delta.get("arguments") or "",
    )
    return ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[call]))


def _last(result: StreamResult) -> ChatGenerationChunk:
    """The message's last chunk: its response metadata and usage (those of the last call)."""
    usage = result.state.get("usage_metadata")
    message = AIMessageChunk(
        content="",
        response_metadata=dict(result.state.get("response_metadata") or {}),
        usage_metadata=usage or None,
    )
    return ChatGenerationChunk(message=message)


def _whole(result: ChatResult) -> Iterator[ChatGenerationChunk]:
    """A call journaled whole, as one chunk."""
    for generation in result.generations[:1]:
        message = generation.message
        chunk = AIMessageChunk(
            content=message.content,
            tool_call_chunks=[
                tool_call_chunk(
                    index=i, id=c.get("id"), name=c.get("name"), args=json.dumps(c.get("args"))
                )
                for i, c in enumerate(getattr(message, "tool_calls", None) or ())
            ],
            response_metadata=message.response_metadata,
            usage_metadata=getattr(message, "usage_metadata", None),
        )
        yield ChatGenerationChunk(message=chunk)


def streaming_model(
    model: BaseChatModel, make_durable: Callable[[Any], Any], stream_recovery: str
) -> Any:
    """``model`` as a :class:`StreamingChatModel` (``make_durable_model``'s, with its
    streamed calls journaled as streams); a durable model given is kept as it is."""
    durable = make_durable_model(model, make_durable)
    if type(durable) is not DurableChatModel:
        return durable
    return StreamingChatModel(
        model=durable.model,
        node=durable.node,
        anode=durable.anode,
        stream_recovery=recovery_of(stream_recovery),
    )


class StreamingChatModel(DurableChatModel):
    """A :class:`DurableChatModel` whose streamed calls are journaled streams (module docstring)."""

    #: ``auto``, ``continue`` or ``restart``: what a streamed call cut by a kill does.
    stream_recovery: str = "auto"

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        journal = current_journal.get()
        if journal is None or not journal.is_open:
            yield from _whole(self._generate(messages, stop, run_manager, **kwargs))
            return
        model, continues = self.model, _continues(self.model, self.stream_recovery)

        def recover(resume: Resume, identity: Any) -> Recovery | None:
            asked = _continued(resume, messages) if continues else None
            return (
                None if asked is None else Recovery("continue", _source(model, asked, stop, kwargs))
            )

        s = stream(
            "model",
            Named(
                "letitloop:langgraph.stream",
                lambda identity: _source(model, messages, stop, kwargs),
            ),
            call_identity(messages, stop, kwargs),
            recover=recover,
            journal=journal,
        )
        for chunk in s:
            yield _chunk(chunk)
        yield _last(s.result)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        journal = current_journal.get()
        if journal is None or not journal.is_open:
            for whole in _whole(await self._agenerate(messages, stop, run_manager, **kwargs)):
                yield whole
            return
        model, continues = self.model, _continues(self.model, self.stream_recovery)

        def recover(resume: Resume, identity: Any) -> Recovery | None:
            asked = _continued(resume, messages) if continues else None
            if asked is None:
                return None
            return Recovery("continue", _asource(model, asked, stop, kwargs))

        s = astream(
            "model",
            Named(
                "letitloop:langgraph.stream",
                lambda identity: _asource(model, messages, stop, kwargs),
            ),
            call_identity(messages, stop, kwargs),
            recover=recover,
            journal=journal,
        )
        async for chunk in s:
            yield _chunk(chunk)
        yield _last(await s.answer())
