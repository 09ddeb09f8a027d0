"""Responses streamed as a durable step: ``client.responses.create(stream=True, background=True)``.

The source turns each event into pieces (``streams.Piece``), each with the
event's ``sequence_number`` as its mark: ``response.created`` gives the
response's id (a ``state`` piece, journaled at once), text and function call
argument deltas their text, ``response.completed`` the usage of the whole
response. Events that add nothing to the answer are not journaled.

A response made in **background** mode goes on on the provider's side while
no one listens: after a kill mid-stream the next attempt **re-attaches** to it,
``client.responses.retrieve(id, stream=True, starting_after=<the last
journaled sequence number>)``, and gets exactly the events it had not
journaled, paid once. Without ``background=True``, or when the provider no
longer has the response (an error on re-attach), the call restarts (after a
``reset``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ...errors import LetItLoopError
from ...identity.step_names import Named
from ...streams import AsyncStream, Piece, Recovery, Resume, Stream, astream, stream

if TYPE_CHECKING:
    from ...run.journal import Journal

__all__ = ["astream_response", "stream_response"]

#: The events that end a response without its answer: the step fails with the provider's
#: error (recorded; the next attempt restarts the call).
_FAILED = ("response.failed", "response.incomplete", "error")


class ResponseFailedError(LetItLoopError):
    """The provider ended a streamed response without its answer (failed, incomplete)."""


def pieces(event: Any) -> Iterator[Piece]:
    """The pieces of one Responses streaming event."""
    kind = getattr(event, "type", "")
    seq = getattr(event, "sequence_number", None)
    if kind == "response.output_text.delta":
        yield Piece.text(event.delta, seq)
    elif kind == "response.created":
        yield Piece.state(seq, response_id=event.response.id)
    elif (
        kind == "response.output_item.added" and getattr(event.item, "type", "") == "function_call"
    ):
        item = event.item
        yield Piece.tool(event.output_index, "", id=item.call_id, name=item.name, mark=seq)
    elif kind == "response.function_call_arguments.delta":
        yield Piece.tool(event.output_index, event.delta, mark=seq)
    elif kind == "response.completed":
        response = event.response
        usage = getattr(response, "usage", None)
        if usage is not None:
            yield Piece.usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                model=getattr(response, "model", None) or None,
            )
        yield Piece.state(seq, status="completed")
    elif kind in _FAILED:
        raise ResponseFailedError(
            f"the response stream ended with {kind}: "
            f"{getattr(event, 'message', '') or event!r:.300}; the next attempt starts it again"
        )


def _events(events: Iterable[Any]) -> Iterator[Piece]:
    for event in events:
        yield from pieces(event)


async def _aevents(events: Any) -> AsyncIterator[Piece]:
    async for event in events:
        for piece in pieces(event):
            yield piece


def _request(request: dict[str, Any]) -> dict[str, Any]:
    return {"background": True, **request, "stream": True}


def _reattach(resume: Resume, request: dict[str, Any]) -> tuple[str, int] | None:
    """The response id and the sequence number to re-attach after, if re-attaching can work."""
    response_id = resume.state.get("response_id")
    if not _request(request)["background"] or not response_id or resume.mark is None:
        return None
    return str(response_id), int(resume.mark)


def _call(client: Any, **request: Any) -> Iterator[Piece]:
    return _events(client.responses.create(**_request(request)))


def _recover(resume: Resume, client: Any, **request: Any) -> Recovery | None:
    if resume.state.get("status") == "completed":  # killed after the last event
        return Recovery("reattach", ())
    found = _reattach(resume, request)
    if found is None:
        return None
    response_id, after = found
    try:
        events = client.responses.retrieve(response_id, stream=True, starting_after=after)
    except Exception:  # the provider has it no more (expired, deleted): restart
        return None
    return Recovery("reattach", _events(events))


async def _acall(client: Any, **request: Any) -> AsyncIterator[Piece]:
    return _aevents(await client.responses.create(**_request(request)))


async def _arecover(resume: Resume, client: Any, **request: Any) -> Recovery | None:
    if resume.state.get("status") == "completed":  # killed after the last event
        return Recovery("reattach", ())
    found = _reattach(resume, request)
    if found is None:
        return None
    response_id, after = found
    try:
        events = await client.responses.retrieve(response_id, stream=True, starting_after=after)
    except Exception:  # the provider has it no more (expired, deleted): restart
        return None
    return Recovery("reattach", _aevents(events))


def stream_response(
    client: Any, name: str, /, *, journal: Journal | None = None, **request: Any
) -> Stream:
    """``client.responses.create(**request, stream=True, background=True)`` as a streamed
    step named ``name`` of ``journal`` (default: the current one); iterate it for the
    chunks. ``background=False`` in ``request`` turns re-attaching off (a kill then
    restarts the call). The step's identity is ``name`` and ``request``, never the client.
    """
    from ...identity.unchecked import unchecked

    return stream(
        name,
        Named("letitloop:openai.responses", _call),
        unchecked(client),
        recover=_recover,
        journal=journal,
        **request,
    )


def astream_response(
    client: Any, name: str, /, *, journal: Journal | None = None, **request: Any
) -> AsyncStream:
    """:func:`stream_response` with an ``AsyncOpenAI`` client: ``async for chunk in …``."""
    from ...identity.unchecked import unchecked

    return astream(
        name,
        Named("letitloop:openai.responses", _acall),
        unchecked(client),
        recover=_arecover,
        journal=journal,
        **request,
    )
