"""The saver's ``RunnableConfig``s: a thread id as stored text, the config naming a checkpoint.

The reading, writing and thread modules all name a thread through
:func:`thread_text`, so every method refuses the same thread ids with the
same error.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig

from ...errors import InvalidNameError


def thread_text(value: Any) -> str:
    """A thread id as the text stored in the file; InvalidNameError if SQLite cannot store it.

    Any text is a thread id (newlines, escapes, separators), except text
    with a lone surrogate (what ``os.fsdecode`` makes of bytes that are not
    UTF-8), which has no UTF-8 form.
    """
    text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidNameError(
            f"thread_id {text!r} is not valid Unicode text (it holds a lone surrogate, which "
            f"SQLite cannot store as UTF-8); decode the bytes it came from with an explicit "
            f"encoding, or use another thread_id"
        ) from None
    return text


def checkpoint_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config that names one stored checkpoint (what ``put`` returns, a tuple's config)."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }
