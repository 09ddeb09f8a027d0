"""Encoding: a value to JSON text, plain when it is plain JSON, its typed values tagged otherwise.

The walk (:func:`_enc`) tags what is not JSON-native, sharing the parts
that need nothing; the built-in containers' tags are encoded here, the
other built-in types by ``tags.py`` and registered classes by their entry.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from ..errors import EncodeError, error_text
from .document import _MAX_INT_DIGITS, MAX_DEPTH, TAG, _marked
from .entries import _how_to_register
from .escape import _dump_escaped, _plain_text
from .failures import _Fail, _key_segment, _never_stored, _short_repr, _too_deep, _type_name
from .plain import _SIMPLE_SCALARS, _WALK_MAX, _plain_few, _plain_small, _plain_values, _values
from .registry import CodecRegistry, default_registry
from .scan import _DICT_ONLY, _JSON_TYPES, _STR_ONLY, _chain, _finite, _plain_scan
from .stack import _FRAMES_PER_LEVEL, _on_fresh_stack
from .tags import _SCALAR_ENCODERS, path_encoder

_encoder = msgspec.json.Encoder()


def _enc(v: Any, reg: CodecRegistry, left: int) -> Any:
    """``v`` as a tree of JSON builtins with tags; shares the parts that need none.

    Containers are copied only where something inside them changed, so a
    plain part of a typed value is handed to msgspec as it is. Callers test
    the plain scalars inline: on small typed payloads the cost is the number
    of Python calls. ``left`` is how many levels of containers ``v`` may
    still open (:data:`MAX_DEPTH` at the top); each container checks it.
    """
    t = type(v)
    if t is dict:
        return _enc_dict(v, reg, left)
    if t is list:
        return _enc_list(v, reg, left)
    if t is str or t is int or t is bool or v is None:
        return v
    f = _BUILTIN_ENCODERS.get(t)
    if f is not None:
        return f(v, reg, left)
    entry = reg._entry_for_type(t)
    if entry is not None:
        try:
            payload = entry.encode(v)
        except (_Fail, RecursionError):
            raise
        except Exception as exc:
            raise _Fail(
                f"the encode function registered for {_type_name(t)} failed: {error_text(exc)}"
            ) from None
        # The object's fields (its payload) are its level: not one more.
        return {TAG + entry.name: _enc(payload, reg, left)}
    f = path_encoder(t)  # pathlib's paths: met only once pathlib is loaded
    if f is not None:
        _BUILTIN_ENCODERS[t] = f
        return f(v, reg, left)
    never = _never_stored(v)
    if never is not None:
        raise _Fail(never)
    raise _Fail(f"type {_type_name(t)} is not registered; register it with {_how_to_register(t)}")


def _enc_list(v: list[Any], reg: CodecRegistry, left: int) -> list[Any]:
    """A list with its typed values tagged: ``v`` itself if none is, else a copy."""
    inner = left - 1
    if inner < 0:
        raise _too_deep()
    if len(v) > _WALK_MAX:
        types = set(map(type, v))
        if _plain_values(v, types):
            return v  # stored as it is: msgspec writes it, nothing is copied
        if (
            types == _DICT_ONLY  # records: dicts of str keys to scalars, in C
            and inner > 0
            and set(map(type, _chain(v))) <= _STR_ONLY
            and 1 not in map(len, v)  # (a one-key dict might look like a tag)
            and set(map(type, _chain(map(_values, v)))) <= _SIMPLE_SCALARS
        ):
            return v
    out = None
    i = 0
    try:
        for i, x in enumerate(v):
            tx = type(x)
            if tx in _SIMPLE_SCALARS or (tx is float and x - x == 0.0):
                continue  # plain (a finite float: nan and inf give nan)
            # (dicts and lists straight to their walk: one call less per container)
            if tx is dict:
                y = _enc_dict(x, reg, inner)
            elif tx is list:
                y = _enc_list(x, reg, inner)
            else:
                y = _enc(x, reg, inner)
            if y is x:
                continue
            if out is None:
                out = v.copy()
            out[i] = y
    except _Fail as exc:
        exc.parts.append(f"[{i}]")
        raise
    return v if out is None else out


def _enc_dict(v: dict[Any, Any], reg: CodecRegistry, left: int) -> Any:
    """A dict with its typed values tagged (``v`` itself if none is), escaped, or as pairs."""
    inner = left - 1
    if inner < 0:
        raise _too_deep()
    out = None
    values = v.values()
    if len(v) <= _WALK_MAX or not (
        set(map(type, v)) <= _STR_ONLY and _plain_values(values, set(map(type, values)))
    ):
        k: Any = None
        try:
            for k, x in v.items():
                if type(k) is not str:
                    return _enc_pairs(v, reg, inner)
                tx = type(x)
                if tx in _SIMPLE_SCALARS or (tx is float and x - x == 0.0):
                    continue  # plain (a finite float: nan and inf give nan)
                if tx is dict:
                    y = _enc_dict(x, reg, inner)
                elif tx is list:
                    y = _enc_list(x, reg, inner)
                else:
                    y = _enc(x, reg, inner)
                if y is x:
                    continue
                if out is None:
                    out = v.copy()
                out[k] = y
        except _Fail as exc:
            if type(k) is str:  # (else it came from _enc_pairs, which named the key)
                exc.parts.append(_key_segment(k))
            raise
    tree = v if out is None else out
    if len(tree) == 1 and next(iter(tree)).startswith(TAG):
        return {"!dict": tree}  # a user's key that looks like a tag: escape it
    return tree


def _enc_pairs(v: dict[Any, Any], reg: CodecRegistry, inner: int) -> Any:
    """A dict with a key that is not a str, as ``{"!dict": [[key, value], ...]}``."""
    pairs = []
    for k, x in v.items():
        try:
            pairs.append([_enc(k, reg, inner), _enc(x, reg, inner)])
        except _Fail as exc:
            exc.parts.append(f"[{_short_repr(k)}]")
            raise
    return {"!dict": pairs}


def _enc_seq(items: Iterable[Any], reg: CodecRegistry, left: int) -> list[Any]:
    """The items of a tuple or set, encoded; on a failure, adds the failing index to the path."""
    inner = left - 1
    if inner < 0:
        raise _too_deep()
    out: list[Any] = []
    append = out.append
    try:
        for x in items:
            append(_enc(x, reg, inner))
    except _Fail as exc:  # the failing item is the next one: len(out)
        exc.parts.append(f"[{len(out)}]")
        raise
    return out


#: Every built-in type's encoder: the containers' here, the others' in ``tags.py``.
_BUILTIN_ENCODERS: dict[type, Callable[[Any, CodecRegistry, int], Any]] = {
    **_SCALAR_ENCODERS,
    tuple: lambda v, reg, left: {"!tuple": _enc_seq(v, reg, left)},
    set: lambda v, reg, left: {"!set": _enc_seq(v, reg, left)},
    frozenset: lambda v, reg, left: {"!frozenset": _enc_seq(v, reg, left)},
}


def _encode(value: Any, reg: CodecRegistry) -> str:
    t = type(value)
    if t is dict or t is list:
        small = _plain_few(value)  # the usual result: a few values, checked where they are
        if small is None and not set(map(type, value.values() if t is dict else value)) <= (
            _JSON_TYPES
        ):
            small = False  # a typed value at the top of a large one: go tag at once
    else:
        small = _plain_small(value)
    if small:
        scan = None
        try:
            out = _encoder.encode(value)
        except (ValueError, OverflowError, TypeError, msgspec.EncodeError):
            pass  # a lone surrogate or an int too long for decimal text: tagged below
        else:
            if len(out) <= _MAX_INT_DIGITS:
                return out.decode()  # UTF-8, without an argument to parse
            text = _plain_text(value, out)
            if text is not None:
                return text
    else:
        scan = None if small is False else _plain_scan(value)
    if scan is not None:
        try:
            out = _encoder.encode(value)
        except (ValueError, OverflowError, TypeError, msgspec.EncodeError):
            pass  # a lone surrogate or an int too long for decimal text: tagged below
        else:
            if _finite(out, scan):
                text = _plain_text(value, out)
                if text is not None:
                    return text
    try:
        tree = _enc(value, reg, MAX_DEPTH)
    except _Fail as exc:
        path = exc.path()
        raise EncodeError(f"cannot encode value at {path}: {exc.reason}", path=path) from None
    # A str-keyed dict or a list stays a JSON object or array, with its typed
    # values tagged in place, and the text gets the mark; any other value is
    # one tag at the top, which needs none.
    try:
        out = _encoder.encode(tree)
    except ValueError:  # a lone surrogate, or an int beyond the writer's digit guard
        return _dump_escaped(tree, None)
    if len(out) <= _MAX_INT_DIGITS:
        return _marked(out.decode("utf-8"), tree)
    return _dump_escaped(tree, out)


def encode(value: Any, registry: CodecRegistry | None = None) -> str:
    """``value`` as JSON text: plain JSON when it is JSON-native, a tagged document otherwise.

    Whatever it returns, :func:`decode` reads back in any process, from any
    call stack. Raises EncodeError (``path`` says where, as
    ``$.items[3].when``) for a value of a type that is neither built in nor
    in ``registry`` (the default registry when None), and for a value that
    nests more than :data:`MAX_DEPTH` levels deep or contains itself.
    """
    reg = registry if registry is not None else default_registry
    try:
        return _encode(value, reg)
    except RecursionError:
        pass  # the caller's stack is deep: encode again on a fresh one
    try:
        return _on_fresh_stack(_encode, value, reg)
    except RecursionError:
        raise EncodeError(
            f"cannot encode value at $: Python's recursion limit "
            f"({sys.getrecursionlimit()}) was reached even on a fresh thread; a value nested "
            f"up to {MAX_DEPTH} levels needs about {_FRAMES_PER_LEVEL * MAX_DEPTH} frames, so "
            f"a registered encode function recursed too deep, or the limit was set too low",
            path="$",
        ) from None
