"""What the events route (``Background.events``) sends of a run's streams, and the ids that
let a client resume exactly where it was.

An event's id is what the client had when it got it: the last step sent (its
``seq``) and, for each stream whose step was not sent yet, the offset of its
last chunk sent. A step's chunks all go before the step (the step is done only
once its stream is), so a stream whose step was sent is complete at the client
and drops out of the id: ``7`` (no stream under way), ``[7,{"story":41}]``.
"""

from __future__ import annotations

import json
from typing import Any

from ..streams.chunks import Chunk

__all__ = ["chunk_events", "cursor", "event_id"]


def chunk_events(key: str, chunks: list[Chunk], done: int, sent_of: dict[str, int]) -> list[str]:
    """Stream ``key``'s ``chunks`` as events (``chunk``; ``reset`` for a restart), ``sent_of``
    moved past each. A ``state`` chunk (the provider's handle) is not sent."""
    events = []
    for c in chunks:
        sent_of[key] = c.seq
        if c.kind == "state":
            continue
        data: dict[str, Any] = {"key": key, "seq": c.seq, "kind": c.kind, "text": c.text}
        if c.kind in ("tool", "end"):
            data["value"] = c.value
        name = "reset" if c.kind == "reset" else "chunk"
        at = cursor(done, sent_of)
        events.append(f"id: {at}\nevent: {name}\ndata: {json.dumps(data)}\n\n")
    return events


def cursor(done: int, sent_of: dict[str, int]) -> str:
    """An event's id: the last step sent (its ``seq``), alone, or with the offset of the last
    chunk sent of each stream whose step was not sent yet (``[7,{"story":41}]``)."""
    if not sent_of:
        return str(done)
    return json.dumps([done, sent_of], separators=(",", ":"), sort_keys=True)


def event_id(text: str | None) -> tuple[int, dict[str, int]]:
    """A ``Last-Event-ID`` header as what was sent up to it: the last step's ``seq`` and the
    last chunk sent of each open stream; from the start (0, none) for none or a damaged one."""
    if not text:
        return 0, {}
    try:
        found = json.loads(text)
    except ValueError:
        return 0, {}
    if type(found) is int:
        return max(0, found), {}
    if (
        isinstance(found, list)
        and len(found) == 2
        and type(found[0]) is int
        and isinstance(found[1], dict)
        and all(type(v) is int for v in found[1].values())
    ):
        return max(0, found[0]), dict(found[1])
    return 0, {}
