"""Redaction: the value of a named dict key replaced by :data:`REDACTED`, at any depth.

What ``lil export --redact KEY`` and ``lil fixture --redact KEY`` do to a
run's input, its result and each row's result before they leave the
journal. Keys are matched exactly (case and all), in plain dicts, in the
codec's tagged dicts (``{"!dict": [[key, value], ...]}``, a dict with
non-text keys) and in the fields of registered classes (dataclasses,
Structs, Pydantic models), which the codec stores as dicts. The value is
replaced whole, whatever it was (text, a number, a nested dict).

Arguments are never in the journal as values, only as digests
(``args_fp``), so they hold nothing to redact; error texts and tracebacks
are kept as recorded (they are not dicts).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import msgspec

#: What a redacted value becomes.
REDACTED = "[redacted]"

#: The codec's tag of a dict whose keys are not all text: a list of [key, value] pairs.
_DICT_TAG = "!dict"


def redact_value(value: Any, keys: Collection[str]) -> Any:
    """``value`` (plain JSON data: dicts, lists, text, numbers) with every ``keys`` value replaced.

    Returns a new value; ``value`` is not changed. No keys: ``value`` itself.
    """
    if not keys:
        return value
    return _walk(value, frozenset(keys))


def _walk(value: Any, keys: frozenset[str]) -> Any:
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if isinstance(k, str) and k in keys:
                out[k] = REDACTED
            elif k == _DICT_TAG and isinstance(v, list):
                out[k] = [_pair(p, keys) for p in v]
            else:
                out[k] = _walk(v, keys)
        return out
    if isinstance(value, list):
        return [_walk(v, keys) for v in value]
    return value


def _pair(pair: Any, keys: frozenset[str]) -> Any:
    """One ``[key, value]`` of a tagged dict, its value redacted when its key is named."""
    if isinstance(pair, list) and len(pair) == 2:
        k, v = pair
        if isinstance(k, str) and k in keys:
            return [k, REDACTED]
        return [_walk(k, keys), _walk(v, keys)]
    return _walk(pair, keys)


def redact_text(text: str | None, keys: Collection[str]) -> str | None:
    """Stored JSON text (the codec's) with every ``keys`` value replaced; None stays None.

    Text that is not JSON (a damaged row) is kept as it is only when it does
    not hold a named key at all; otherwise it is replaced whole by the JSON
    text of :data:`REDACTED`, since what it holds cannot be told apart.
    """
    if text is None or not keys:
        return text
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        if any(k in text for k in keys):
            return msgspec.json.encode(REDACTED).decode()
        return text
    redacted = _walk(value, frozenset(keys))
    if redacted == value:
        return text  # nothing named here: the stored text, byte for byte
    return msgspec.json.encode(redacted).decode()
