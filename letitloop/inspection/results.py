"""A stored result (the codec's JSON text) as plain JSON-ready values: :func:`decode_result`,
and :func:`json_ready`, which tags what strict JSON cannot hold as the journal tags it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec

from .. import codec
from ..errors import DecodeError
from ..integrity.encryption import encrypted

#: Ints longer than this many bits are exported as ``{"!int": "0x…"}``, as the
#: codec stores them: Python refuses to write an int of more than 4300 digits
#: as decimal text (a denial-of-service guard), hex text has no such limit.
#: The same bound as the codec's, so an int is tagged in export where it is
#: tagged in the file.
MAX_PLAIN_INT_BITS = 13_000


#: A strict encoder, used only to ask whether a value needs tagging: in C, it
#: raises ValueError at a nan, an infinity or an int too long for decimal text.
_STRICT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False)


def json_ready(value: Any) -> Any:
    """``value`` (JSON builtins) with what strict JSON cannot hold tagged as the journal tags it.

    An int longer than :data:`MAX_PLAIN_INT_BITS` becomes ``{"!int": "0x…"}``
    and a nan or an infinity ``{"!float": "nan"}`` (``"inf"``, ``"-inf"``),
    so ``json.dumps(..., allow_nan=False)`` always succeeds and any strict
    reader (``jq``) parses the text. Everything else is returned as it is
    (the same object when there is nothing to tag).
    """
    try:
        _STRICT.encode(value)  # the common case: nothing to tag, found at C speed
    except (ValueError, TypeError, RecursionError):
        return _tagged(value)
    return value


def _tagged(value: Any) -> Any:
    t = type(value)
    if t is int:
        return {"!int": hex(value)} if value.bit_length() > MAX_PLAIN_INT_BITS else value
    if t is float:
        if math.isfinite(value):
            return value
        return {"!float": "nan" if value != value else ("inf" if value > 0 else "-inf")}
    if t is dict:
        return {k: _tagged(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [_tagged(v) for v in value]
    return value


def decode_result(
    text: object, registry: codec.CodecRegistry | None = None
) -> tuple[Any, str | None]:
    """A stored result as ``(value, None)``, or ``(None, why)`` when the stored text is damaged.

    The value is decoded by the codec into plain JSON-ready values
    (:func:`json_ready`): types JSON has no word for (datetimes, UUIDs, sets,
    …) take their JSON form (msgspec's ``to_builtins``), an object it cannot
    convert its ``repr``. A result the codec cannot decode (a type this
    program has not registered) comes back as the stored JSON, tags and all.
    A text that is not JSON at all (a hand-edited or damaged row) is not a
    value: ``why`` says what is wrong with it, and the stored text is left
    for the caller to show as it is.
    """
    if text is None:
        return None, None
    if not isinstance(text, str):
        return None, f"the stored result is not JSON text but {type(text).__name__}"
    if encrypted(text):
        return None, (
            "encrypted: set LETITLOOP_ENCRYPTION_KEY to the key it was written with to read it"
        )
    try:
        value = codec.decode(text, registry)
        tree = msgspec.to_builtins(value, enc_hook=repr, str_keys=True)
    except (DecodeError, TypeError, ValueError, RecursionError):
        try:
            tree = msgspec.json.decode(text)
        except (msgspec.DecodeError, RecursionError) as exc:
            return None, f"the stored result is not valid JSON ({exc})"
    return json_ready(tree), None


def decoded(text: object, registry: codec.CodecRegistry | None = None) -> Any:
    """:func:`decode_result`'s value: the stored result as JSON-ready values, None if damaged."""
    return decode_result(text, registry)[0]
