"""Running an encode or a decode again on a fresh thread, for a caller already deep in recursion."""

from __future__ import annotations

import _thread
import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Python frames a level of nesting costs the decoder at most (a tuple's:
#: _dec, _dec_tag, its decoder, _dec_items, _dec_in_place).
_FRAMES_PER_LEVEL = 5


def _on_fresh_stack(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a new thread, whose stack starts empty (with this context's variables).

    For a caller already deep in recursion: encoding or decoding a value
    nested :data:`MAX_DEPTH` levels needs a few hundred frames, which a
    fresh thread has under the default recursion limit. Started and awaited
    with ``_thread``'s C functions, so that the caller needs no more frames
    for it than this one.
    """
    context = contextvars.copy_context()
    outcome: list[tuple[bool, Any]] = []
    done = _thread.allocate_lock()
    done.acquire()

    def run() -> None:
        try:
            outcome.append((True, context.run(fn, *args)))
        except BaseException as exc:
            outcome.append((False, exc))
        finally:
            done.release()

    _thread.start_new_thread(run, ())
    done.acquire()
    ok, result = outcome[0]
    if not ok:
        raise result
    return result  # type: ignore[no-any-return]
