"""Encoding of step results as JSON text (msgspec), and the registry of user types.

This first version accepts JSON-native values only: None, bool, int, float,
str, list and dict with str keys. Anything else is refused with an
EncodeError naming the path to the value, before anything is written.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .errors import DecodeError, EncodeError

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


class CodecRegistry:
    """The types a journal may rebuild on decode. Empty in this version."""

    def __init__(self) -> None:
        self._types: dict[str, type] = {}


default_registry = CodecRegistry()


def _check(value: Any, path: str) -> None:
    t = type(value)
    if t is str or t is int or t is float or t is bool or value is None:
        return
    if t is list:
        for i, item in enumerate(value):
            _check(item, f"{path}[{i}]")
        return
    if t is dict:
        for k, item in value.items():
            if type(k) is not str:
                raise EncodeError(
                    f"cannot encode value at {path}: dict key {k!r} is a "
                    f"{type(k).__name__}, expected str",
                    path=path,
                )
            _check(item, f"{path}.{k}")
        return
    raise EncodeError(
        f"cannot encode value at {path}: type {t.__module__}.{t.__qualname__} is not "
        f"supported; return JSON-native values (None, bool, int, float, str, list, dict)",
        path=path,
    )


def encode(value: Any, registry: CodecRegistry | None = None) -> str:
    """``value`` as JSON text. Raises EncodeError naming the path to an unsupported value."""
    _check(value, "$")
    try:
        return _encoder.encode(value).decode("utf-8")
    except (TypeError, ValueError, OverflowError) as exc:
        raise EncodeError(f"cannot encode value at $: {exc}", path="$") from None


def decode(text: str, registry: CodecRegistry | None = None) -> Any:
    """The value that :func:`encode` turned into ``text``. Raises DecodeError."""
    try:
        return _decoder.decode(text)
    except msgspec.DecodeError as exc:
        raise DecodeError(f"cannot decode recorded value: {exc}") from None
