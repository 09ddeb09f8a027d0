"""The OpenAI-compatible client's streams as durable steps (docs/streams.md).

``stream_chat`` / ``astream_chat``: ``client.chat.completions.create(stream=True)``,
continued from the journaled prefix after a kill. ``stream_response`` /
``astream_response``: ``client.responses.create(stream=True, background=True)``,
re-attached after a kill. Each is a ``letitloop.streams`` step: iterate it for
the chunks, read ``.result`` (``await .answer()``) for the whole answer. The
client is the user's (``openai.OpenAI`` or any compatible one); this package
never imports ``openai`` itself.
"""

from .chat import assistant_prefix, astream_chat, stream_chat
from .responses import ResponseFailedError, astream_response, stream_response

__all__ = [
    "ResponseFailedError",
    "assistant_prefix",
    "astream_chat",
    "astream_response",
    "stream_chat",
    "stream_response",
]
