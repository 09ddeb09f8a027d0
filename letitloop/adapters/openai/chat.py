"""Chat completions streamed as a durable step: ``client.chat.completions.create(stream=True)``.

The source turns each ``ChatCompletionChunk`` into pieces (``streams.Piece``):
the first choice's text and tool call deltas, its finish reason, and the
usage the last chunk carries (``stream_options={"include_usage": True}`` is
asked for). A chat completion cannot be re-attached: after a kill mid-stream
the next attempt **continues from the journaled prefix**: the same request
with the answer so far appended as the assistant's message, whose content the
model goes on from (what OpenAI-compatible servers that complete a final
assistant message do; ``continuation=`` changes the request, or is None to
restart). Tool calls whose argument JSON was journaled whole are kept (sent
back in that message's ``tool_calls``; the continuation's own come after
them); one cut in its JSON makes the call restart (after a ``reset``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ...identity.step_names import Named
from ...identity.unchecked import unchecked
from ...streams import AsyncStream, Piece, Recovery, Resume, Stream, astream, stream

if TYPE_CHECKING:
    from ...streams.calls import StreamingRun

__all__ = ["assistant_prefix", "astream_chat", "stream_chat"]

Continuation = Callable[[Resume, dict[str, Any]], "dict[str, Any] | None"]


def assistant_prefix(resume: Resume, request: dict[str, Any]) -> dict[str, Any] | None:
    """The request that asks for the rest of ``resume``'s answer: ``request`` with the
    answer so far as the last message, the assistant's, to be continued: its text, and
    its tool calls whose JSON is whole (``tool_calls``), so that the model goes on after
    them rather than making them again. None (restart) when nothing was journaled, or a
    tool call was cut in its JSON."""
    if not (resume.text or resume.tool_calls) or resume.partial_tools:
        return None
    said: dict[str, Any] = {"role": "assistant", "content": resume.text}
    if resume.tool_calls:
        said["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for _, c in sorted(resume.tool_calls.items())
        ]
    return {**request, "messages": [*request["messages"], said]}


def _request(request: dict[str, Any]) -> dict[str, Any]:
    options = dict(request.get("stream_options") or {})
    options.setdefault("include_usage", True)  # the usage comes with the last chunk
    return {**request, "stream": True, "stream_options": options}


def pieces(event: Any, tools_from: int = 0) -> Iterator[Piece | str]:
    """The pieces of one ``ChatCompletionChunk`` (its first choice); tool call indexes
    moved by ``tools_from`` (a continuation's calls come after those kept)."""
    usage = getattr(event, "usage", None)
    if usage is not None:
        yield Piece.usage(
            input_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
            model=getattr(event, "model", None) or None,
        )
    for choice in event.choices or ():
        if choice.index != 0:
            continue
        delta = choice.delta
        if delta is not None:
            if delta.content:
                yield delta.content
            for call in delta.tool_calls or ():
                function = call.function
                yield Piece.tool(
                    call.index + tools_from,
                    (function.arguments if function is not None else None) or "",
                    id=call.id,
                    name=function.name if function is not None else None,
                )
        if choice.finish_reason:
            yield Piece.state(finish_reason=choice.finish_reason)


def _chat(events: Iterable[Any], tools_from: int = 0) -> Iterator[Piece | str]:
    for event in events:
        yield from pieces(event, tools_from)


async def _achat(events: Any, tools_from: int = 0) -> AsyncIterator[Piece | str]:
    async for event in events:
        for piece in pieces(event, tools_from):
            yield piece


def _after(resume: Resume) -> int:
    return max(resume.tool_calls, default=-1) + 1


def _call(client: Any, continuation: Continuation | None, **request: Any) -> Iterator[Any]:
    return _chat(client.chat.completions.create(**_request(request)))


def _recover(
    resume: Resume, client: Any, continuation: Continuation | None, **request: Any
) -> Recovery | None:
    if resume.state.get("finish_reason"):  # the answer was whole: killed before its end
        return Recovery("continue", ())
    asked = continuation(resume, request) if continuation is not None else None
    if asked is None:
        return None
    return Recovery(
        "continue", _chat(client.chat.completions.create(**_request(asked)), _after(resume))
    )


async def _acall(client: Any, continuation: Continuation | None, **request: Any) -> Any:
    return _achat(await client.chat.completions.create(**_request(request)))


async def _arecover(
    resume: Resume, client: Any, continuation: Continuation | None, **request: Any
) -> Recovery | None:
    if resume.state.get("finish_reason"):  # the answer was whole: killed before its end
        return Recovery("continue", ())
    asked = continuation(resume, request) if continuation is not None else None
    if asked is None:
        return None
    events = await client.chat.completions.create(**_request(asked))
    return Recovery("continue", _achat(events, _after(resume)))


def stream_chat(
    client: Any,
    name: str,
    /,
    *,
    journal: StreamingRun | None = None,
    continuation: Continuation | None = assistant_prefix,
    **request: Any,
) -> Stream:
    """``client.chat.completions.create(**request, stream=True)`` as a streamed step named
    ``name`` of ``journal`` (default: the current one); iterate it for the chunks.

    The step's identity is ``name`` and ``request`` (model, messages, …), never the
    client. After a kill mid-stream: continued from the journaled prefix
    (``continuation``: :func:`assistant_prefix`; None restarts the call).
    """
    return stream(
        name,
        Named("letitloop:openai.chat", _call),
        unchecked(client),
        unchecked(continuation),
        recover=_recover,
        journal=journal,
        **request,
    )


def astream_chat(
    client: Any,
    name: str,
    /,
    *,
    journal: StreamingRun | None = None,
    continuation: Continuation | None = assistant_prefix,
    **request: Any,
) -> AsyncStream:
    """:func:`stream_chat` with an ``AsyncOpenAI`` client: ``async for chunk in …``."""
    return astream(
        name,
        Named("letitloop:openai.chat", _acall),
        unchecked(client),
        unchecked(continuation),
        recover=_arecover,
        journal=journal,
        **request,
    )
