"""A rate-limited call, recognised: how long until it may be made again, from the error.

A queued run that a rate limit stopped is suspended, not failed
(``queue_worker.py``): its entry goes back to the queue, due again when the
limit resets, and its worker takes other work meanwhile. :func:`retry_after`
says whether an error is such a refusal, and for how long:

- ``letitloop.RateLimited(retry_after=...)``, raised by the user or an adapter;
- any error that carries an HTTP status 429 the way the common clients carry
  it, read by attribute only, so that none of them is imported here: openai's
  ``RateLimitError`` and any error of its shape, as anthropic's
  (``status_code``, ``response.headers``), httpx's ``HTTPStatusError`` and
  requests' ``HTTPError`` (``response``), aiohttp's ``ClientResponseError``
  (``status``, ``headers``). The wait is the response's ``retry-after-ms``
  header, else its ``Retry-After`` (seconds or an HTTP date), else
  :data:`DEFAULT_SECONDS`.

The error's causes (``raise ... from``) and context are looked at too, a few
deep: an adapter that wraps the client's error is recognised by what it wraps.
"""

from __future__ import annotations

import time
from email.utils import parsedate_to_datetime
from typing import Any

from ..errors import RateLimited

#: Seconds to wait after a 429 that said nothing of when to come back: the service's
#: limit is usually per second or per minute, and a second is what openai's own client
#: waits first.
DEFAULT_SECONDS = 1.0
#: How many causes deep an error is looked into (``__cause__``, ``__context__``).
DEPTH = 4


def retry_after(exc: BaseException, now: float | None = None) -> float | None:
    """Seconds until the call ``exc`` refused may be made again; None: not a rate limit."""
    seen: set[int] = set()
    todo: list[tuple[BaseException, int]] = [(exc, 0)]
    while todo:
        e, depth = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, RateLimited):
            return e.retry_after
        if _status(e) == 429:
            return _wait(_headers(e), time.time() if now is None else now)
        if depth < DEPTH:
            todo += [(c, depth + 1) for c in (e.__cause__, e.__context__) if c is not None]
    return None


def _attr(obj: object, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # a property that raises (a response not read yet): not there
        return None


def _status(e: BaseException) -> int | None:
    response = _attr(e, "response")
    for where, name in ((e, "status_code"), (e, "status"), (response, "status_code"),
                        (response, "status")):  # fmt: skip
        value = _attr(where, name) if where is not None else None
        if type(value) is int:
            return value
    return None


def _headers(e: BaseException) -> Any:
    response = _attr(e, "response")
    found = _attr(response, "headers") if response is not None else None
    return found if found is not None else _attr(e, "headers")


def _header(headers: Any, name: str) -> str | None:
    """A header's value: ``headers.get`` is case-blind in every client's mapping; a plain
    dict is looked up as sent too."""
    get = _attr(headers, "get")
    if get is None:
        return None
    for key in (name, name.title(), name.upper()):
        try:
            value = get(key)
        except Exception:
            return None
        if value is not None:
            return str(value)
    return None


def _wait(headers: Any, now: float) -> float:
    ms = _number(_header(headers, "retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    text = _header(headers, "retry-after")
    seconds = _number(text)
    if seconds is None and text is not None:
        try:
            seconds = parsedate_to_datetime(text).timestamp() - now
        except (TypeError, ValueError, IndexError):
            seconds = None
    return DEFAULT_SECONDS if seconds is None else max(0.0, seconds)


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if 0 <= value < float("inf") else None
