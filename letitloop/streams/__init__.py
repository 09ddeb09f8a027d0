"""Streamed model calls that survive a killed process (docs/streams.md).

A streamed call is a step (:func:`stream`, :func:`astream`) whose chunks are
journaled as they arrive; readers (:func:`read`, :func:`follow`) read a run's
stream from any offset while it runs and after. After a kill mid-stream the
next attempt re-attaches, continues from the journaled prefix, or restarts
(a ``Recovery`` from the provider's hook, or none). The OpenAI-compatible
client's streams are ``letitloop.adapters.openai``'s.

A public room (users import it by path). Its modules, bottom up: ``chunks``
(pieces, chunks, what they add up to), ``calls`` (one attempt: the batch, the
flusher, ``Recovery``), ``stepping`` (the step, sync and async), ``reading``
(the readers, through a read-only inspector).
"""

from .calls import Recovery, StreamAbandonedError
from .chunks import Chunk, Piece, Resume, StreamResult
from .reading import afollow, follow, read, stream_keys
from .stepping import AsyncStream, Stream, astream, stream

__all__ = [
    "AsyncStream",
    "Chunk",
    "Piece",
    "Recovery",
    "Resume",
    "Stream",
    "StreamAbandonedError",
    "StreamResult",
    "afollow",
    "astream",
    "follow",
    "read",
    "stream",
    "stream_keys",
]
