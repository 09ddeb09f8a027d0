"""What a stream is made of: the pieces a source yields, the chunks journaled, what they add up to.

A source (a model call, streamed) yields **pieces**: text (a plain ``str``),
a tool call's delta, the provider's handle to re-attach (``state``), usage.
The stream step (``stepping.py``) numbers each piece and journals it as a
**chunk** (``Chunk``: a row of ``stream_chunks``, ``storage_streams.py``);
readers (``reading.py``) hand chunks out again. What the chunks since the
stream's last ``reset`` add up to is a :class:`Resume`: the answer so far,
the tool calls whose JSON is complete, the provider's handle and position.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import MisuseError

__all__ = ["Chunk", "Piece", "Resume", "StreamResult", "piece_of"]


@dataclass(frozen=True)
class Piece:
    """One thing a source yields besides plain text (which it may yield as a ``str``).

    ``kind``: ``"text"`` (``data`` the text), ``"tool"`` (``data`` a tool call's delta:
    ``{"index": 0, "id": …, "name": …, "arguments": "<more JSON text>"}``), ``"state"``
    (``data`` a dict the provider's recovery needs, journaled at once: a response id),
    or ``"usage"`` (``data`` the ``letitloop.usage`` keywords: recorded on the step at
    once, not journaled as a chunk). ``mark``: the provider's position after this piece
    (the Responses API's ``sequence_number``), journaled with it.
    """

    kind: str
    data: Any = ""
    mark: str | None = None

    @staticmethod
    def text(text: str, mark: str | int | None = None) -> Piece:
        """A text delta."""
        return Piece("text", text, None if mark is None else str(mark))

    @staticmethod
    def tool(
        index: int,
        arguments: str = "",
        *,
        id: str | None = None,
        name: str | None = None,
        mark: str | int | None = None,
    ) -> Piece:
        """A delta of tool call ``index``: its id and name (first delta), more argument text."""
        delta: dict[str, Any] = {"index": index, "arguments": arguments}
        if id is not None:
            delta["id"] = id
        if name is not None:
            delta["name"] = name
        return Piece("tool", delta, None if mark is None else str(mark))

    @staticmethod
    def state(mark: str | int | None = None, **state: Any) -> Piece:
        """The provider's handle to re-attach (JSON values), journaled before anything else."""
        return Piece("state", state, None if mark is None else str(mark))

    @staticmethod
    def usage(**usage: Any) -> Piece:
        """What the call was billed (``letitloop.usage`` keywords: input_tokens, …)."""
        return Piece("usage", usage)


def piece_of(item: object) -> Piece:
    """A source's item as a ``Piece``: a ``str`` is text; a ``Piece`` is itself.

    Raises MisuseError for anything else.
    """
    if type(item) is str:
        return Piece("text", item)
    if isinstance(item, Piece) and item.kind in ("text", "tool", "state", "usage"):
        return item
    raise MisuseError(
        f"a stream's source yielded {type(item).__name__} {item!r:.80}; expected text (str) "
        f"or a letitloop.streams.Piece (Piece.text, Piece.tool, Piece.state, Piece.usage): "
        f"turn the provider's events into those in the source"
    )


@dataclass(frozen=True)
class Chunk:
    """One journaled chunk of a stream (a row of ``stream_chunks``).

    ``seq`` is its offset in the stream (0, 1, 2, … across attempts); ``kind`` one
    of ``text``, ``tool``, ``state``, ``reset``, ``end``; ``text`` the text of a
    ``text`` chunk (``""`` for the others); ``data`` the JSON text of the others.
    A ``reset`` means the call restarted: a reader drops what it has of the stream.
    """

    seq: int
    kind: str
    data: str
    mark: str | None = None
    attempt: int = 0
    at: str = ""

    @property
    def text(self) -> str:
        """The text this chunk adds to the answer (``""`` unless it is a ``text`` chunk)."""
        return self.data if self.kind == "text" else ""

    @property
    def value(self) -> Any:
        """A ``tool``/``state``/``reset``/``end`` chunk's data, decoded; a text's text."""
        return self.data if self.kind == "text" else json.loads(self.data)

    @classmethod
    def of_row(cls, row: tuple[Any, ...]) -> Chunk:
        """A chunk from a store's ``ChunkRow`` (seq, attempt, kind, data, mark, at)."""
        seq, attempt, kind, data, mark, at = row
        return cls(int(seq), str(kind), str(data), mark, int(attempt), str(at))


def since_reset(chunks: list[Chunk]) -> list[Chunk]:
    """The chunks after the last ``reset`` (all of them when there is none)."""
    for i in range(len(chunks) - 1, -1, -1):
        if chunks[i].kind == "reset":
            return chunks[i + 1 :]
    return chunks


@dataclass
class Resume:
    """What the chunks journaled so far (since the last reset) add up to: what a
    provider's recovery hook continues from.

    ``text``: the answer so far; ``tool_calls``: the tool calls whose argument JSON
    is complete (``{"id", "name", "arguments"}``, by index), ``partial_tools``: the
    indexes of those cut off; ``state``: every ``state`` piece merged (a response
    id); ``mark``: the provider's position after the last chunk journaled (None if
    none was given); ``chunks``: how many chunks that is; ``ended``: the stream
    was journaled to its end.
    """

    text: str = ""
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    partial_tools: set[int] = field(default_factory=set)
    state: dict[str, Any] = field(default_factory=dict)
    mark: str | None = None
    chunks: int = 0
    ended: bool = False
    recoveries: list[str] = field(default_factory=list)
    _texts: list[str] = field(default_factory=list, repr=False)
    _tools: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def empty(self) -> bool:
        """Nothing was journaled of this call: a fresh start, not a recovery."""
        return self.chunks == 0

    def add(self, chunk: Chunk) -> None:
        """Take ``chunk`` into the sums (a ``reset`` empties them, keeping the recoveries)."""
        self.chunks += 1
        if chunk.mark is not None:
            self.mark = chunk.mark
        kind = chunk.kind
        if kind == "text":
            self._texts.append(chunk.data)
            return
        if kind == "tool":
            delta = json.loads(chunk.data)
            call = self._tools.setdefault(
                int(delta["index"]), {"id": None, "name": None, "arguments": ""}
            )
            for name in ("id", "name"):
                if delta.get(name):
                    call[name] = delta[name]
            call["arguments"] += delta.get("arguments", "")
        elif kind == "state":
            value = json.loads(chunk.data)
            if "recovery" in value:  # how an attempt went on (calls.StreamCall.recovered)
                self.recoveries.append(value.pop("recovery"))
            self.state.update(value)
        elif kind == "reset":
            recoveries = [*self.recoveries, "restart"]
            self.__init__()  # type: ignore[misc]
            self.recoveries = recoveries
        elif kind == "end":
            self.ended = True

    def settle(self) -> Resume:
        """Finish the sums (the text joined, tool calls told complete or cut); ``self``."""
        self.text = "".join(self._texts)
        self.tool_calls, self.partial_tools = {}, set()
        for index, call in sorted(self._tools.items()):
            try:
                json.loads(call["arguments"] or "{}")
            except ValueError:
                self.partial_tools.add(index)
            else:
                self.tool_calls[index] = dict(call)
        return self

    @classmethod
    def of(cls, chunks: list[Chunk]) -> Resume:
        """The sums of ``chunks`` (a stream's, in order)."""
        resume = cls()
        for chunk in chunks:
            resume.add(chunk)
        return resume.settle()


@dataclass(frozen=True)
class StreamResult:
    """A streamed step's result: the whole answer, whatever the attempts it took.

    ``text``: the answer; ``tool_calls``: its complete tool calls, in order
    (``{"id", "name", "arguments"}``, arguments as JSON text); ``recoveries``: how each
    attempt after a kill went on (``"reattach"``, ``"continue"``, ``"restart"``), empty
    for a stream that ran through; ``state``: the provider's handle and whatever else
    the source said (``response_id``, ``finish_reason``); ``chunks``: the stream's
    length in chunks (its next offset).
    """

    text: str
    tool_calls: tuple[dict[str, Any], ...] = ()
    recoveries: tuple[str, ...] = ()
    state: dict[str, Any] = field(default_factory=dict)
    chunks: int = 0

    def recorded(self) -> dict[str, Any]:
        """As the step's row records it: plain JSON values, no class name."""
        return {
            "text": self.text,
            "tool_calls": list(self.tool_calls),
            "recoveries": list(self.recoveries),
            "state": self.state,
            "chunks": self.chunks,
        }

    @classmethod
    def from_recorded(cls, value: dict[str, Any]) -> StreamResult:
        """Back from a step's recorded result (``recorded``)."""
        return cls(
            text=value["text"],
            tool_calls=tuple(value["tool_calls"]),
            recoveries=tuple(value["recoveries"]),
            state=dict(value["state"]),
            chunks=int(value["chunks"]),
        )
