"""The built-in types the codec tags: datetimes, bytes, Decimals, UUIDs, paths, odd floats and text.

Each has an encoder (the value to its one-key ``{"!name": payload}``) and a
decoder (the payload back to the value). The containers among the built-in
tags (tuple, set, frozenset, ``!dict`` for a dict with other keys or an
escaped one, and ``!list``, read in rows written before the mark) hold other
values, so their encoders and decoders live with the walks
(``encoding.py``, ``decoding.py``); this module names them, so that the
registry can refuse every built-in name.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import sys
import uuid
from collections.abc import Callable
from math import isfinite as _isfinite
from typing import TYPE_CHECKING, Any

import msgspec

from .failures import _Fail, _need, _short_repr

if TYPE_CHECKING:
    from .decoding import _Reading
    from .registry import CodecRegistry

_UTC = _dt.timezone.utc

# -- encoders ------------------------------------------------------------------


def _enc_float(v: float, reg: CodecRegistry, left: int) -> Any:
    if _isfinite(v):
        return v
    return {"!float": "nan" if v != v else ("inf" if v > 0 else "-inf")}


def _odd_offset(tz: _dt.tzinfo | None, v: Any) -> int | None:
    """A fixed offset with seconds or microseconds, in microseconds; None otherwise.

    Python's ``fromisoformat`` misreads some of those (``+00:00:00.000001``
    comes back as UTC), so they are stored beside the naive text instead.
    """
    if type(tz) is not _dt.timezone:
        return None
    offset = tz.utcoffset(None)
    if offset.microseconds == 0 and offset.seconds % 60 == 0:
        return None
    return offset // _dt.timedelta(microseconds=1)


def _enc_datetime(v: _dt.datetime, reg: CodecRegistry, left: int) -> Any:
    tz = v.tzinfo
    if (tz is None or tz is _UTC) and not v.fold:
        # The common cases: msgspec writes the RFC 3339 text itself, in C
        # ("…Z" for UTC, no offset for naive), without the checks below.
        return {"!datetime": v}
    key: str | int | None = getattr(tz, "key", None) if type(tz).__name__ == "ZoneInfo" else None
    odd = _odd_offset(tz, v)
    if odd is not None:
        key, v = odd, v.replace(tzinfo=None)
    if key is None and not v.fold:
        return {"!datetime": v.isoformat()}
    # [text, zone, fold]: a zoneinfo zone keeps its name (the offset in the
    # text pins the instant), an odd fixed offset is an int of microseconds,
    # and fold (which of two repeated wall times) is not part of ISO text.
    return {"!datetime": [v.isoformat(), key, v.fold] if v.fold else [v.isoformat(), key]}


def _enc_time(v: _dt.time, reg: CodecRegistry, left: int) -> Any:
    odd = _odd_offset(v.tzinfo, v)
    if odd is not None:
        return {"!time": [v.replace(tzinfo=None).isoformat(), v.fold, odd]}
    return {"!time": [v.isoformat(), v.fold] if v.fold else v.isoformat()}


def _enc_path(tag: str) -> Callable[[Any, CodecRegistry, int], Any]:
    def enc(v: Any, reg: CodecRegistry, left: int) -> Any:
        return {tag: str(v)}

    return enc


#: pathlib's classes the codec tags, by name. pathlib is not imported here: with
#: urllib.parse and ipaddress, which it imports, it was a fifth of what `import
#: letitloop` loads beyond sqlite3 and msgspec (issue 30). A path can exist only in
#: a program that loaded pathlib, so its encoder is found when a value's type is
#: missing from the tables below (:func:`path_encoder`), and its decoder imports
#: pathlib when a recorded path is read.
_PATH_NAMES = ("PurePosixPath", "PureWindowsPath", "PosixPath", "WindowsPath")


def is_path_type(t: type) -> bool:
    """Whether ``t`` is one of pathlib's path classes the codec tags (built in, like a date)."""
    pathlib = sys.modules.get("pathlib")
    return pathlib is not None and any(t is getattr(pathlib, n, None) for n in _PATH_NAMES)


def path_encoder(t: type) -> Callable[[Any, CodecRegistry, int], Any] | None:
    """The encoder of ``t`` if it is a pathlib path class the codec tags; None otherwise.

    Added to :data:`_SCALAR_ENCODERS` once found, so the next path of its type
    is looked up as any other built-in type is.
    """
    if not is_path_type(t):
        return None
    f = _SCALAR_ENCODERS[t] = _enc_path("!" + t.__name__)
    return f


#: The encoders of the built-in types that hold no other value.
_SCALAR_ENCODERS: dict[type, Callable[[Any, CodecRegistry, int], Any]] = {
    float: _enc_float,
    # msgspec writes these payloads itself, in C, as exactly the text the
    # decoders below read: base64, ISO dates and durations, canonical UUIDs.
    bytes: lambda v, reg, left: {"!bytes": v},
    bytearray: lambda v, reg, left: {"!bytearray": v},
    _dt.datetime: _enc_datetime,
    _dt.date: lambda v, reg, left: {"!date": v},
    _dt.time: _enc_time,
    _dt.timedelta: lambda v, reg, left: {"!timedelta": v},
    decimal.Decimal: lambda v, reg, left: {"!Decimal": str(v)},
    uuid.UUID: lambda v, reg, left: {"!UUID": v},
    # pathlib's paths: added by path_encoder, once a path is met.
}


def scalar_tag(v: Any) -> Any | None:
    """``v`` as the codec tags it when ``v`` is of a built-in type that holds no other value.

    ``{"!datetime": …}``, ``{"!UUID": …}``, ``{"!float": "nan"}`` (a finite
    float comes back as it is); None for any other type. The fingerprint
    reads it, so that two such values are one argument exactly when the codec
    writes the same document for them.
    """
    f = _SCALAR_ENCODERS.get(type(v)) or path_encoder(type(v))
    return None if f is None else f(v, None, 0)  # type: ignore[arg-type]  # (unused by these)


#: The built-in types that hold no other value and have a tag (:func:`scalar_tag`),
#: pathlib's paths aside (:func:`is_path_type`).
SCALAR_TYPES = frozenset(_SCALAR_ENCODERS)


# -- decoders ------------------------------------------------------------------


def _dec_float(payload: Any, reg: _Reading) -> float:
    if payload not in ("nan", "inf", "-inf"):
        raise _Fail(f"recorded float {_short_repr(payload)} is not 'nan', 'inf' or '-inf'")
    return float(payload)


def _dec_datetime(payload: Any, reg: _Reading) -> _dt.datetime:
    if type(payload) is str:
        if payload[-1:] == "Z":  # UTC, as msgspec wrote it: msgspec reads it back, in C
            return msgspec.convert(payload, _dt.datetime)
        return _dt.datetime.fromisoformat(payload)
    if type(payload) is not list or len(payload) not in (2, 3):
        raise _Fail("recorded datetime is neither text nor [text, zone, fold]")
    text, key, *fold = payload
    value = _dt.datetime.fromisoformat(_need(text, str, "datetime"))
    if type(key) is str:
        import zoneinfo  # stdlib; loads a zone file by its name, never code

        return value.astimezone(zoneinfo.ZoneInfo(key))
    if type(key) is int:
        value = value.replace(tzinfo=_dt.timezone(_dt.timedelta(microseconds=key)))
    elif key is not None:
        raise _Fail(f"recorded datetime zone {_short_repr(key)} is neither a name nor an offset")
    return value.replace(fold=1) if fold == [1] else value


def _dec_time(payload: Any, reg: _Reading) -> _dt.time:
    if type(payload) is str:
        return _dt.time.fromisoformat(payload)
    text, fold, *offset = _need(payload, list, "time")
    value = _dt.time.fromisoformat(_need(text, str, "time")).replace(fold=fold)
    if offset:
        value = value.replace(tzinfo=_dt.timezone(_dt.timedelta(microseconds=offset[0])))
    return value


def _dec_path(name: str) -> Callable[[Any, _Reading], Any]:
    def dec(payload: Any, reg: _Reading) -> Any:
        if type(payload) is dict:  # {"!str": [...]}: a name that is not UTF-8
            payload = reg.value(payload)
        text = _need(payload, str, name)
        import pathlib  # a recorded path is read: only then (see _PATH_NAMES)

        try:
            return getattr(pathlib, name)(text)
        except NotImplementedError:
            raise _Fail(
                f"recorded {name} {text!r} cannot be rebuilt on this system "
                f"({sys.platform}); it was recorded on another operating system"
            ) from None

    return dec


def _dec_str(payload: Any, reg: _Reading) -> str:
    parts = []
    for part in _need(payload, list, "str"):
        if type(part) is str:
            parts.append(part)
        elif type(part) is int and 0xD800 <= part <= 0xDFFF:
            parts.append(chr(part))
        else:
            raise _Fail(
                f"recorded str holds {_short_repr(part)}, expected text or a lone surrogate's code "
                f"point (55296-57343); the row was edited or written by another program"
            )
    return "".join(parts)


#: The decoders of the built-in tags whose payload holds no other value.
_SCALAR_DECODERS: dict[str, Callable[[Any, _Reading], Any]] = {
    "int": lambda p, reg: int(_need(p, str, "int"), 16),
    "str": _dec_str,
    "float": _dec_float,
    "bytes": lambda p, reg: base64.b64decode(_need(p, str, "bytes"), validate=True),
    "bytearray": lambda p, reg: bytearray(base64.b64decode(_need(p, str, "bytes"), validate=True)),
    "datetime": _dec_datetime,
    "date": lambda p, reg: _dt.date.fromisoformat(_need(p, str, "date")),
    "time": _dec_time,
    "timedelta": lambda p, reg: msgspec.convert(_need(p, str, "timedelta"), _dt.timedelta),
    "Decimal": lambda p, reg: decimal.Decimal(_need(p, str, "Decimal")),
    "UUID": lambda p, reg: msgspec.convert(_need(p, str, "UUID"), uuid.UUID),
    **{name: _dec_path(name) for name in _PATH_NAMES},
}

#: The built-in containers of other values, by tag name.
_CONTAINER_TAGS: dict[type, str] = {tuple: "tuple", set: "set", frozenset: "frozenset"}

#: Every built-in type the codec encodes with a tag (a registry refuses them), pathlib's
#: paths aside (:func:`is_path_type`).
_BUILTIN_TYPES = frozenset({*_SCALAR_ENCODERS, *_CONTAINER_TAGS})

#: Every built-in tag name: ``dict`` tags a dict with keys other than str, or
#: one that needs escaping (and, in rows written before the mark, a whole
#: str-keyed dict holding tags, as ``list`` a whole list). Built-in
#: exceptions' names are reserved too (``entries._BUILTIN_EXCEPTIONS``).
_BUILTIN_NAMES = frozenset({*_SCALAR_DECODERS, *_CONTAINER_TAGS.values(), "list", "dict"})
