"""Encoding of step results as JSON text (msgspec), and the registry of user types.

A result made only of JSON-native values (``None``, ``bool``, ``int``,
finite ``float``, ``str``, ``list``, ``dict`` with ``str`` keys — exact
types, not subclasses) is stored as ordinary JSON, untagged. Anything else
is stored as a *tagged document*: its top level is a JSON object with one
key starting with ``!`` (``{"!tuple": [1, 2]}``, ``{"!list": [1,
{"!datetime": "2026-11-30T03:04:05+00:00"}]}``), and inside it every
non-JSON value is such a one-key object. Decoding looks at the top level
only: plain JSON comes straight back from msgspec.

Built-in and standard-library types are always known. The user's own
classes (dataclasses, NamedTuples, enums, ``msgspec.Struct``, Pydantic v2
models, exceptions, anything with an encode/decode pair) are rebuilt only
if registered: :func:`register` on the default registry, or a
:class:`CodecRegistry` passed to ``Journal(registry=...)``. A tag is looked
up in the registry and nowhere else: decoding never imports a module, never
resolves a name the data gives, never uses pickle or eval.

Evolution: a registered class that gained a field with a default decodes
old rows; a recorded field the class no longer has, or a field the class
requires that the row lacks, is a DecodeError naming the class and field.

What encode accepts, decode reads back, in any process and from any call
stack: a value nests at most :data:`MAX_DEPTH` levels (deeper is an
EncodeError naming the path), and decode retries on a fresh thread when the
caller's stack is too deep for it; an int beyond Python's 4,300-digit guard
is hex text (``{"!int": "0x…"}``) whatever the writer's guard, and a str
holding lone surrogates, which UTF-8 cannot carry, is
``{"!str": ["text", 56575, …]}``.
"""

from __future__ import annotations

import _thread
import base64
import builtins
import contextvars
import dataclasses
import datetime as _dt
import decimal
import enum
import functools
import gc
import math
import operator
import pathlib
import re
import sys
import uuid
from collections.abc import Callable, Iterable
from itertools import chain, compress, repeat
from typing import Any, TypeVar

import msgspec

from .errors import DecodeError, EncodeError

__all__ = ["CodecRegistry", "decode", "default_registry", "encode", "register"]

T = TypeVar("T")

#: First character of every tag key. A tagged value is a JSON object with
#: exactly one key, and that key starts with this.
TAG = "!"

#: How deep a value may nest: containers (list, tuple, set, frozenset, dict)
#: and objects' fields (a dataclass's, a Struct's, what a registered encode
#: returns) inside one another. Encode refuses a deeper value (or one that
#: contains itself) with an EncodeError naming the path, so that whatever is
#: recorded reads back: decoding such a value needs at most about five Python
#: frames a level, well inside the default recursion limit of 1000 on the
#: fresh thread decode falls back to when the caller's stack is too deep.
MAX_DEPTH = 100

#: Python refuses to turn an int of more than this many digits into decimal
#: text or back (``sys.set_int_max_str_digits``, a denial-of-service guard).
#: Longer ints are stored as ``{"!int": "0x…"}``, hex text having no such
#: limit, whatever the writer's own setting.
_MAX_INT_DIGITS = 4300

_encoder = msgspec.json.Encoder()
_UTC = _dt.timezone.utc
_decoder = msgspec.json.Decoder()

# -- errors with paths ---------------------------------------------------------


class _Fail(Exception):
    """Internal: a failure deep in a value; containers add their path segment on the way out."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.parts: list[str] = []

    def path(self) -> str:
        return "$" + "".join(reversed(self.parts))


def _key_segment(key: object) -> str:
    if type(key) is str and key.isidentifier():
        return f".{key}"
    return f"[{key!r}]"


def _too_deep() -> _Fail:
    return _Fail(
        f"it nests more than {MAX_DEPTH} levels deep (lists, tuples, sets, dicts and objects' "
        f"fields inside one another), or contains itself; a value nested deeper could not be "
        f"read back from every call stack. Return a flatter value, or one without cycles"
    )


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


def _type_name(t: type) -> str:
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


# -- the registry --------------------------------------------------------------


class _Entry:
    """How one registered type is encoded to a JSON-able payload and rebuilt from it."""

    __slots__ = ("cls", "decode", "encode", "name")

    def __init__(
        self,
        cls: type,
        name: str,
        encode: Callable[[Any], Any],
        decode: Callable[[Any], Any],
    ) -> None:
        self.cls = cls
        self.name = name
        self.encode = encode
        self.decode = decode


def _check_fields(
    cls: type,
    payload: Any,
    names: Iterable[str],
    required: Iterable[str],
    allow_extra: bool = False,
) -> dict[str, Any]:
    """The recorded fields of ``cls`` as a dict, or a _Fail naming the field that does not fit."""
    if type(payload) is not dict:
        raise _Fail(
            f"recorded {_type_name(cls)} is a {type(payload).__name__}, expected an object of "
            f"fields; the row was not written by this codec or was edited"
        )
    known = set(names)
    if not allow_extra:
        for field in payload:
            if field not in known:
                raise _Fail(
                    f"the recorded {_type_name(cls)} has a field {field!r} that the class no "
                    f"longer has (removed or renamed?); add the field back (a default is "
                    f"enough) or reset the run"
                )
    for field in required:
        if field not in payload:
            raise _Fail(
                f"the recorded {_type_name(cls)} has no field {field!r}, which the class "
                f"requires (added or renamed?); give {field!r} a default so older rows "
                f"decode, or reset the run"
            )
    return payload


def _construct(cls: type, kwargs: dict[str, Any]) -> Any:
    try:
        return cls(**kwargs)
    except RecursionError:
        raise  # the stack, not the row: decode() retries on a fresh one
    except Exception as exc:
        raise _Fail(f"rebuilding {_type_name(cls)} failed: {_describe(exc)}") from None


def _dataclass_entry(cls: type, name: str) -> _Entry:
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = tuple(f.name for f in fields)
    required = tuple(
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )

    def enc(v: Any) -> Any:
        return {n: getattr(v, n) for n in names}

    def dec(payload: Any) -> Any:
        return _construct(cls, _check_fields(cls, payload, names, required))

    return _Entry(cls, name, enc, dec)


def _namedtuple_entry(cls: type, name: str) -> _Entry:
    names: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    defaults: dict[str, Any] = cls._field_defaults  # type: ignore[attr-defined]
    required = tuple(n for n in names if n not in defaults)

    def enc(v: Any) -> Any:
        return dict(zip(names, v, strict=True))

    def dec(payload: Any) -> Any:
        return _construct(cls, _check_fields(cls, payload, names, required))

    return _Entry(cls, name, enc, dec)


def _struct_entry(cls: type, name: str) -> _Entry:
    info = msgspec.structs.fields(cls)
    names = tuple(f.name for f in info)
    required = tuple(f.name for f in info if f.required)

    def enc(v: Any) -> Any:
        return {n: getattr(v, n) for n in names}

    def dec(payload: Any) -> Any:
        return _construct(cls, _check_fields(cls, payload, names, required))

    return _Entry(cls, name, enc, dec)


def _pydantic_entry(cls: Any, name: str) -> _Entry:
    fields = cls.model_fields
    names = tuple(fields)
    required = tuple(n for n, f in fields.items() if f.is_required())
    allow_extra = cls.model_config.get("extra") == "allow"

    def enc(v: Any) -> Any:
        out = {n: getattr(v, n) for n in names}
        extra = v.__pydantic_extra__
        if extra:
            out.update(extra)
        return out

    def dec(payload: Any) -> Any:
        data = _check_fields(cls, payload, names, required, allow_extra)
        # The values were validated when the step returned them and come back
        # as recorded (nested models already rebuilt), so validators do not
        # run a second time: model_construct trusts them.
        try:
            return cls.model_construct(**data)
        except RecursionError:
            raise
        except Exception as exc:
            raise _Fail(f"rebuilding {_type_name(cls)} failed: {_describe(exc)}") from None

    return _Entry(cls, name, enc, dec)


def _enum_entry(cls: Any, name: str) -> _Entry:
    def enc(v: Any) -> Any:
        return v.value

    def dec(payload: Any) -> Any:
        try:
            return cls(payload)
        except ValueError:
            raise _Fail(
                f"{_type_name(cls)} has no member with the recorded value {_short_repr(payload)} "
                f"(removed or changed?); add it back or reset the run"
            ) from None

    return _Entry(cls, name, enc, dec)


def _exception_entry(cls: Any, name: str) -> _Entry:
    def enc(v: BaseException) -> Any:
        # What pickle would keep, without pickle: BaseException.__reduce__
        # gives (class, args, state), and state holds what args miss
        # (OSError's filename, ImportError's name, the instance __dict__).
        reduced = v.__reduce__()
        if type(reduced) is tuple and len(reduced) >= 2 and reduced[0] is type(v):
            args, state = reduced[1], reduced[2] if len(reduced) > 2 else None
        else:  # a class with its own __reduce__: keep what every exception has
            args, state = v.args, getattr(v, "__dict__", None)
        out: dict[str, Any] = {"args": list(args)}
        if state:
            out["attrs"] = dict(state)
        return out

    def dec(payload: Any) -> Any:
        data = _check_fields(cls, payload, ("args", "attrs"), ("args",))
        args = data["args"]
        attrs = data.get("attrs")
        if type(args) is not list:
            raise _Fail(f"recorded {_type_name(cls)} has args that are not a list")
        if attrs is not None and (
            type(attrs) is not dict or any(k.startswith("__") and k != "__notes__" for k in attrs)
        ):
            raise _Fail(
                f"recorded {_type_name(cls)} has attributes that are not plain names; "
                f"the row was edited or written by another program"
            )
        try:
            # __new__, not __init__: BaseException.__new__ stores args without
            # running the class's own __init__, whose signature may differ
            # from args (the reason many exceptions do not survive pickling).
            exc = cls.__new__(cls, *args)
            if attrs:
                exc.__setstate__(attrs)
        except RecursionError:
            raise
        except Exception as err:
            raise _Fail(f"rebuilding {_type_name(cls)} failed: {_describe(err)}") from None
        return exc

    return _Entry(cls, name, enc, dec)


def _is_pydantic_model(cls: type) -> bool:
    # Only look if pydantic is already imported: a class cannot be a
    # pydantic model otherwise, and the core never imports pydantic itself.
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None) if pydantic is not None else None
    return base is not None and isinstance(cls, type) and issubclass(cls, base)


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields") and hasattr(cls, "_asdict")


def _how_to_register(t: type) -> str:
    """The registration call a user should write for ``t`` (used in error messages)."""
    if _registrable_kind(t) is not None:
        return f"letitloop.codec.register({t.__qualname__})"
    return (
        f"letitloop.codec.register({t.__qualname__}, encode=..., decode=...) "
        f"(encode returns an encodable value, decode rebuilds the object from it)"
    )


def _registrable_kind(cls: type) -> str | None:
    if isinstance(cls, type) and issubclass(cls, BaseException):
        return "exception"
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return "enum"
    if dataclasses.is_dataclass(cls) and isinstance(cls, type):
        return "dataclass"
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        return "struct"
    if isinstance(cls, type) and _is_namedtuple(cls):
        return "namedtuple"
    if _is_pydantic_model(cls):
        return "pydantic"
    return None


_KIND_ENTRY: dict[str, Callable[[Any, str], _Entry]] = {
    "exception": _exception_entry,
    "enum": _enum_entry,
    "dataclass": _dataclass_entry,
    "struct": _struct_entry,
    "namedtuple": _namedtuple_entry,
    "pydantic": _pydantic_entry,
}


class CodecRegistry:
    """The user types a journal may encode and rebuild, by exact type and by stored name.

    ``CodecRegistry(Order, Color)`` registers those classes at once;
    ``extends=default_registry`` also lets it use every type registered
    there (looked up when needed, so later registrations count). A registry
    passed to ``Journal(registry=...)`` or ``@durable(registry=...)``
    replaces the default one for that journal. Built-in and standard-library
    types are known to every registry.
    """

    def __init__(self, *types: type, extends: CodecRegistry | None = None) -> None:
        self._by_type: dict[type, _Entry] = {}
        self._by_name: dict[str, _Entry] = {}
        self.extends = extends
        for cls in types:
            self.register(cls)

    def register(
        self,
        cls: type[T],
        *,
        name: str | None = None,
        aliases: Iterable[str] = (),
        encode: Callable[[T], Any] | None = None,
        decode: Callable[[Any], T] | None = None,
    ) -> type[T]:
        """Let values of exactly type ``cls`` be encoded and rebuilt; returns ``cls``.

        Dataclasses, NamedTuples, enums, ``msgspec.Struct`` subclasses,
        Pydantic v2 models and exceptions need nothing more. Any other class
        needs ``encode`` (the object to an encodable value, which may itself
        hold typed values) and ``decode`` (that value back to the object).
        ``name`` is the tag stored in the journal (default
        ``module.QualName``); ``aliases`` are older names still accepted on
        decode (after moving or renaming the class). Subclasses are not
        covered: register each class that appears in results.

        Raises TypeError for a class that needs an encode/decode pair and got
        none, or a built-in type; ValueError when a name is taken by another
        class or reserved.
        """
        if not isinstance(cls, type):
            raise TypeError(f"register() takes a class, got {cls!r}")
        if cls in _BUILTIN_ENCODERS or cls in (str, int, bool, type(None)):
            raise TypeError(
                f"{_type_name(cls)} is built in: the codec encodes it without registration"
            )
        if (encode is None) != (decode is None):
            raise TypeError("register() takes encode= and decode= together, or neither")
        name = name if name is not None else f"{cls.__module__}.{cls.__qualname__}"
        if encode is not None and decode is not None:
            entry = _Entry(cls, name, encode, decode)
        else:
            kind = _registrable_kind(cls)
            if kind is None:
                raise TypeError(
                    f"{_type_name(cls)} is not a dataclass, NamedTuple, Enum, msgspec.Struct, "
                    f"Pydantic model or exception, so the codec cannot tell how to store it; "
                    f"pass encode= and decode= (e.g. register({cls.__qualname__}, "
                    f"encode=lambda v: v.to_dict(), decode={cls.__qualname__}.from_dict))"
                )
            entry = _KIND_ENTRY[kind](cls, name)
        names = [name, *aliases]
        for n in names:
            if not n or n in _BUILTIN_DECODERS or n.startswith(TAG):
                raise ValueError(
                    f"codec name {n!r} is empty, starts with {TAG!r} or is reserved for a "
                    f"built-in type; choose another name="
                )
            if _str_parts(n) is not None:
                raise ValueError(
                    f"codec name {n!r} holds a lone surrogate, which a journal (UTF-8 text) "
                    f"cannot store; choose another name="
                )
            taken = self._by_name.get(n)
            if taken is not None and taken.cls is not cls:
                raise ValueError(
                    f"codec name {n!r} is already registered for {_type_name(taken.cls)}; "
                    f"pass a different name= for {_type_name(cls)}"
                )
        old = self._by_type.get(cls)
        if old is not None:  # re-registering: forget the old names
            for n, e in list(self._by_name.items()):
                if e is old:
                    del self._by_name[n]
        self._by_type[cls] = entry
        for n in names:
            self._by_name[n] = entry
        return cls

    def __contains__(self, cls: object) -> bool:
        return self._entry_for_type(cls) is not None  # type: ignore[arg-type]

    def _entry_for_type(self, t: type) -> _Entry | None:
        reg: CodecRegistry | None = self
        while reg is not None:
            entry = reg._by_type.get(t)
            if entry is not None:
                return entry
            reg = reg.extends
        return _BUILTIN_EXCEPTIONS.get(t)

    def _entry_for_name(self, name: str) -> _Entry | None:
        reg: CodecRegistry | None = self
        while reg is not None:
            entry = reg._by_name.get(name)
            if entry is not None:
                return entry
            reg = reg.extends
        return None

    def __repr__(self) -> str:
        names = ", ".join(sorted(self._by_name))
        return (
            f"<CodecRegistry [{names}]{' extends ' + repr(self.extends) if self.extends else ''}>"
        )


#: The registry used when a journal is given none; :func:`register` adds to it.
default_registry = CodecRegistry()


def register(
    cls: type[T] | None = None,
    *,
    name: str | None = None,
    aliases: Iterable[str] = (),
    encode: Callable[[T], Any] | None = None,
    decode: Callable[[Any], T] | None = None,
) -> Any:
    """Register ``cls`` on the default registry (see :meth:`CodecRegistry.register`).

    Works as a call (``register(Order)``) and as a class decorator
    (``@register`` or ``@register(name="Order")``); returns the class.
    """
    if cls is None:

        def decorate(c: type[T]) -> type[T]:
            return default_registry.register(
                c, name=name, aliases=aliases, encode=encode, decode=decode
            )

        return decorate
    return default_registry.register(cls, name=name, aliases=aliases, encode=encode, decode=decode)


# -- encoding ------------------------------------------------------------------

_NONE = type(None)
_SCALARS = frozenset({str, int, float, bool, _NONE})
_SIMPLE_SCALARS = frozenset({str, int, bool, _NONE})
_JSON_TYPES = frozenset({str, int, float, bool, _NONE, dict, list})
_CONTAINERS = frozenset({dict, list})
_STR_ONLY = frozenset({str})
_DICT_ONLY = {dict}
_FLOAT_ONLY = {float}
_is_float = float.__instancecheck__
_chain = chain.from_iterable
_values = dict.values
_isfinite = math.isfinite


#: The groups of a scanned value that hold floats: those holding nothing
#: else, and those holding floats among other values.
_Floats = tuple[list[list[float]], list[list[Any]]]

_referents = gc.get_referents
_is = operator.is_
_count_of = operator.countOf


def _dict_traverse_shows_keys() -> bool:
    """Whether ``gc.get_referents`` tells str-keyed dicts from others (CPython 3.10+ does)."""
    try:
        return _referents({"a": 1}) == [1] and len(_referents({1: 2})) == 2
    except Exception:
        return False


#: :func:`_plain_scan` splits the values of at least this many dicts of one
#: size, and at most this many keys, into one group per key.
_COLUMNS_MIN_ROWS = 16
_COLUMNS_MAX = 64

#: :func:`_plain_scan` relies on it; elsewhere the part-by-part check is used.
_REFERENTS_SHOW_KEYS = _dict_traverse_shows_keys()


#: How many containers and floats a value may hold for :func:`_plain_small` to
#: check it one part at a time. Below this a plain loop beats the level scan's
#: setup (sets, maps and lists per level); above it the scan's C passes win.
_SMALL_PARTS = 48
assert _SMALL_PARTS <= MAX_DEPTH


def _plain_small(value: Any, parts: int = _SMALL_PARTS) -> bool | None:
    """Whether a small ``value`` is plain JSON: True, False, or None when it is not small.

    The same rules as :func:`_plain_walk` (exact JSON types, str keys, finite
    floats, no tag-like top-level key), checked part by part for the typical
    small step result, where it costs a fraction of the scan. A value it
    calls small holds at most ``parts`` containers, so it cannot nest deeper
    than :data:`MAX_DEPTH`.
    """
    if type(value) is dict and len(value) == 1:
        key = next(iter(value))
        if type(key) is str and key.startswith(TAG):
            return False  # would read back as a tag: escape it
    stack = [value]
    pop, extend = stack.pop, stack.extend
    budget = parts
    while stack:
        v = pop()
        t = type(v)
        if t is str or t is int or t is bool or v is None:
            continue
        budget -= 1
        if budget < 0:
            return None
        if t is dict:
            if len(v) > parts:
                return None
            for k in v:
                if type(k) is not str:
                    return False
            extend(v.values())
        elif t is list:
            if len(v) > parts:
                return None
            extend(v)
        elif t is float:
            if not _isfinite(v):
                return False
        else:
            return False
        if len(stack) > parts:
            return None
    return True


def _tag_like(value: Any) -> bool:
    """Whether ``value`` is a one-key dict whose key starts with ``!`` (at the top, a tag)."""
    if type(value) is dict and len(value) == 1:
        key = next(iter(value))
        return type(key) is str and key.startswith(TAG)
    return False


def _plain_walk(value: Any) -> _Floats | None:
    """The portable twin of :func:`_plain_referents`: the same verdict, part by part in Python.

    Plain JSON is: exact ``dict`` (``str`` keys), ``list``, ``str``, ``int``,
    ``bool``, ``None`` and finite ``float``, nested at most :data:`MAX_DEPTH`
    containers deep, and not a one-key dict whose key starts with ``!``
    (which would read back as a tag). None when ``value`` is not plain;
    otherwise no float groups left to check (this walk checks them itself).
    """
    if _tag_like(value):
        return None
    level = [value]
    for depth in range(MAX_DEPTH + 1):
        below: list[Any] = []
        for v in level:
            t = type(v)
            if t is dict:
                if depth == MAX_DEPTH:
                    return None  # a container below MAX_DEPTH others
                for k in v:
                    if type(k) is not str:
                        return None
                below.extend(v.values())
            elif t is list:
                if depth == MAX_DEPTH:
                    return None
                below.extend(v)
            elif t is float:
                if not _isfinite(v):
                    return None
            elif not (t is str or t is int or t is bool or v is None):
                return None
        if not below:
            break
        level = below
    return [], []


def _plain_referents(value: Any) -> _Floats | None:
    """Whether ``value`` is plain JSON, in C-speed passes over each level of the tree (CPython).

    The same verdict as :func:`_plain_walk` (the tests hold them to it), with
    non-finite floats left to :func:`_finite`: None when the value is not
    plain, otherwise the groups of values that hold floats. msgspec has no
    hook for the types it encodes natively (msgspec issue #671), so this
    scan is what keeps type identity, and it never runs a Python-level loop
    over the values:

    - ``set(map(type, group))`` checks the exact type of every value;
    - ``gc.get_referents(*group)`` gives the next level: the items of the
      lists and the values of the dicts, in one C call (scalars have no
      referents and drop out);
    - a dict whose keys are all exact ``str`` hands the collector its values
      only; any other dict (a non-str key, or str keys in a table that once
      held another key) its keys too (CPython's ``dict_traverse``). Dicts
      that give more referents than they hold entries get their keys
      checked, and the keys then count as values of the next level;
    - the values of records (many dicts of one size, in row order) are
      grouped by column: the values of one key mostly share a type, so the
      dicts to count come as a whole group and floats in short ones.
    """
    if _tag_like(value):
        return None
    groups: list[list[Any]] = [[value]]
    pure_floats: list[list[float]] = []
    mixed_floats: list[list[Any]] = []
    for depth in range(MAX_DEPTH + 1):
        next_groups: list[list[Any]] = []
        for group in groups:
            first = type(group[0])
            if type(group[-1]) is first and _count_of(map(type, group), first) == len(group):
                seen = {first}  # one type (a column of records, say): counted, not hashed
            else:
                seen = set(map(type, group))
            if not seen <= _JSON_TYPES:
                return None
            if float in seen:
                (pure_floats if seen == _FLOAT_ONLY else mixed_floats).append(group)
            if dict in seen and seen <= _CONTAINERS:  # containers only: count them all
                if depth == MAX_DEPTH:
                    return None  # containers below MAX_DEPTH others
                children = _referents(*group)
                width = 0
                if seen == _DICT_ONLY and len(group) >= _COLUMNS_MIN_ROWS:
                    sizes = set(map(len, group))
                    width = sizes.pop() if len(sizes) == 1 else 0
                if len(children) != (width * len(group) if width else sum(map(len, group))):
                    if not _str_keys_only(group):
                        return None
                    width = 0  # the keys came too: no columns
                if 1 < width <= _COLUMNS_MAX:
                    next_groups += [children[i::width] for i in range(width)]
                    continue
            elif dict in seen:  # count the dicts among the scalars
                if depth == MAX_DEPTH:
                    return None
                dicts = _dicts_of(group)
                if len(_referents(*dicts)) != sum(map(len, dicts)) and not _str_keys_only(dicts):
                    return None
                children = _referents(*group)
            elif list in seen:
                if depth == MAX_DEPTH:
                    return None
                children = _referents(*group)
            else:
                continue
            if children:
                next_groups.append(children)
        if not next_groups:
            break
        groups = next_groups
    return pure_floats, mixed_floats


def _dicts_of(group: list[Any]) -> list[dict[Any, Any]]:
    return list(compress(group, map(_is, map(type, group), repeat(dict))))


def _str_keys_only(group: list[Any]) -> bool:
    """Whether every key of the dicts in ``group`` is an exact ``str`` (checked in C)."""
    return set(map(type, _chain(_dicts_of(group)))) <= _STR_ONLY


#: The plain-JSON check for values too large for :func:`_plain_small`: the
#: C-speed level scan where ``gc.get_referents`` tells str-keyed dicts from
#: others (CPython), its portable twin elsewhere. Both give one verdict on
#: every value; tests/test_codec.py runs them side by side under hypothesis.
_plain_scan: Callable[[Any], _Floats | None] = (
    _plain_referents if _REFERENTS_SHOW_KEYS else _plain_walk
)


def _finite(text: bytes, groups: _Floats) -> bool:
    """Whether every float in the scanned groups is finite.

    msgspec writes nan and ±inf as ``null``, so a text without ``null`` has
    none. Otherwise a group holding only floats is summed (a nan or an inf
    makes the sum one; finite floats can overflow it, and are then checked
    one by one), and the floats of a mixed group are checked one by one, in C.
    """
    pure, mixed = groups
    if not (pure or mixed) or b"null" not in text:
        return True
    for group in pure:
        if not _isfinite(sum(group)) and not all(map(_isfinite, group)):
            return False
    return all(all(map(_isfinite, filter(_is_float, group))) for group in mixed)


#: Containers longer than this are first checked with C passes
#: (``set(map(type, ...))``), which return a plain one untouched at a few
#: nanoseconds a value; shorter ones are walked value by value, which costs
#: less than setting those passes up.
_WALK_MAX = 24


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
                f"the encode function registered for {_type_name(t)} failed: {_describe(exc)}"
            ) from None
        # The object's fields (its payload) are its level: not one more.
        return {TAG + entry.name: _enc(payload, reg, left)}
    if isinstance(v, type):
        raise _Fail(f"{v!r} is a class, not a value; return an instance or its name")
    raise _Fail(f"type {_type_name(t)} is not registered; register it with {_how_to_register(t)}")


def _plain_values(values: Any, types: set[type]) -> bool:
    """Whether a long container's values, of these ``types``, are all plain scalars, in C."""
    return types <= _SIMPLE_SCALARS or (
        types <= _SCALARS and all(map(_isfinite, filter(_is_float, values)))
    )


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


def _enc_float(v: float, reg: CodecRegistry, left: int) -> Any:
    if _isfinite(v):
        return v
    return {"!float": "nan" if v != v else ("inf" if v > 0 else "-inf")}


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


_BUILTIN_ENCODERS: dict[type, Callable[[Any, CodecRegistry, int], Any]] = {
    float: _enc_float,
    tuple: lambda v, reg, left: {"!tuple": _enc_seq(v, reg, left)},
    set: lambda v, reg, left: {"!set": _enc_seq(v, reg, left)},
    frozenset: lambda v, reg, left: {"!frozenset": _enc_seq(v, reg, left)},
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
    pathlib.PurePosixPath: _enc_path("!PurePosixPath"),
    pathlib.PureWindowsPath: _enc_path("!PureWindowsPath"),
    pathlib.PosixPath: _enc_path("!PosixPath"),
    pathlib.WindowsPath: _enc_path("!WindowsPath"),
}


# -- what JSON text cannot hold: lone surrogates, ints beyond the digit guard ----

_get_int_max_str_digits: Callable[[], int] | None = getattr(sys, "get_int_max_str_digits", None)


def _int_digits_written() -> int:
    """Ints of more digits than this are written as ``{"!int": "0x…"}``.

    4300 (Python's default guard), or the writer's own guard where it is
    lower (msgspec cannot write more as decimal text there). Never more: a
    reader with the default guard could not read a longer decimal.
    """
    limit = _get_int_max_str_digits() if _get_int_max_str_digits is not None else 0
    return limit if 0 < limit < _MAX_INT_DIGITS else _MAX_INT_DIGITS


def _decimal_unguarded() -> bool:
    """Whether msgspec here writes ints of more than 4300 digits without complaint.

    True where the writer turned the guard off (``sys.set_int_max_str_digits(0)``)
    or raised it, and on a Python without it: such ints must be found and
    tagged by :func:`_escape`, since msgspec raises no error to say so.
    """
    limit = _get_int_max_str_digits() if _get_int_max_str_digits is not None else 0
    return limit == 0 or limit > _MAX_INT_DIGITS


@functools.lru_cache(maxsize=8)
def _ten_to(digits: int) -> int:
    return int(10**digits)


def _holds_big_int(value: Any, bound: int) -> bool:
    """Whether the plain JSON ``value`` holds an int at least ``bound`` in size (walked)."""
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        v = pop()
        t = type(v)
        if t is int:
            if v >= bound or -v >= bound:
                return True
        elif t is dict:
            extend(v.values())
        elif t is list:
            extend(v)
    return False


#: One lone surrogate (U+D800–U+DFFF), as a group so that ``re.split`` keeps it.
_SURROGATE = r"([\ud800-\udfff])"  # (escapes for re: no lone surrogate in the source)


def _str_parts(s: str) -> list[str | int] | None:
    """``s`` as text parts and the code points of its lone surrogates; None when it has none.

    ``"report-\\udcff.txt"`` (what ``os.fsdecode`` makes of a non-UTF-8
    file name) gives ``["report-", 56575, ".txt"]``: UTF-8, and so SQLite,
    cannot hold a lone surrogate, and msgspec refuses to write one.
    """
    if s.isascii():
        return None
    pieces = re.split(_SURROGATE, s)
    if len(pieces) == 1:
        return None
    return [ord(p) if i % 2 else p for i, p in enumerate(pieces) if p]


def _escape(v: Any, bound: int) -> Any:
    """The tagged tree ``v`` with what JSON text cannot hold tagged in its turn.

    A str with a lone surrogate becomes ``{"!str": [text, code point, …]}``
    (a dict key too: its dict is then stored as ``[key, value]`` pairs) and
    an int at least ``bound`` in size ``{"!int": "0x…"}``. Returns new
    containers where something changed; never mutates ``v``, which may
    share lists and dicts with the caller's value. Runs only when msgspec
    refused the tree or may have written a too-long int.
    """
    t = type(v)
    if t is str:
        parts = _str_parts(v)
        return v if parts is None else {"!str": parts}
    if t is int:
        return {"!int": hex(v)} if v >= bound or -v >= bound else v
    if t is list:
        out = [_escape(x, bound) for x in v]
        return v if all(map(_is, out, v)) else out
    if t is dict:
        if len(v) == 1:
            key, x = next(iter(v.items()))
            if key.startswith(TAG):  # a tag: its key is ours, its payload is escaped
                if key == "!datetime":
                    return v  # ISO text, small ints and a zone name, which msgspec checks
                y = _escape_fields(x, bound) if key == "!dict" and type(x) is dict else None
                if y is None:
                    y = _escape(x, bound)
                return v if y is x else {key: y}
        y = _escape_fields(v, bound)
        return y if type(y) is dict else {"!dict": y}
    return v


def _escape_fields(d: dict[str, Any], bound: int) -> dict[str, Any] | list[list[Any]]:
    """A str-keyed dict with its values escaped, or its ``[key, value]`` pairs if a key must be."""
    if not all(map(str.isascii, d)) and any(_str_parts(k) is not None for k in d):
        return [[_escape(k, bound), _escape(x, bound)] for k, x in d.items()]
    out = {k: _escape(x, bound) for k, x in d.items()}
    return d if all(map(_is, out.values(), d.values())) else out


def _dump_escaped(tree: Any, out: bytes | None) -> str:
    """The tagged tree as JSON text, with :func:`_escape` applied where msgspec needs it.

    ``out`` is msgspec's text of ``tree`` when it wrote one (a long one),
    None when it refused (a lone surrogate, an int beyond the writer's guard).
    """
    if out is not None and not _decimal_unguarded():
        return out.decode("utf-8")
    escaped = _escape(tree, _ten_to(_int_digits_written()))
    if escaped is tree and out is not None:
        return out.decode("utf-8")  # a long text without a long int
    try:
        return _encoder.encode(escaped).decode("utf-8")
    except (ValueError, OverflowError, TypeError, msgspec.EncodeError) as exc:
        raise EncodeError(f"cannot encode value at $: {exc}", path="$") from None


def _plain_text(value: Any, out: bytes) -> str | None:
    """``out``, msgspec's text of the plain ``value``, if it reads back in every process."""
    if (
        len(out) > _MAX_INT_DIGITS
        and _decimal_unguarded()
        and _holds_big_int(value, _ten_to(_MAX_INT_DIGITS))
    ):
        return None  # an int that a reader with the default guard could not read
    return out.decode("utf-8")


def _encode(value: Any, reg: CodecRegistry) -> str:
    t = type(value)
    if (t is dict or t is list) and not set(
        map(type, value.values() if t is dict else value)
    ) <= _JSON_TYPES:
        scan = None  # a typed value at the top (the usual place): go tag at once
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
                    return out.decode("utf-8")
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
    t = type(tree)
    if t is list:
        tree = {"!list": tree}
    elif t is dict and not (len(tree) == 1 and next(iter(tree)).startswith(TAG)):
        tree = {"!dict": tree}
    try:
        out = _encoder.encode(tree)
    except ValueError:  # a lone surrogate, or an int beyond the writer's digit guard
        return _dump_escaped(tree, None)
    if len(out) <= _MAX_INT_DIGITS:
        return out.decode("utf-8")
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


# -- decoding ------------------------------------------------------------------


#: ``_Reading.tags_left`` that never runs out: walk everything.
_WALK_ALL = 1 << 62


class _Reading:
    """One decode's state: the registry, and how many tags the text still holds.

    Every tag is an object whose first key starts with ``!``, and the text
    says how many such objects there are. Once the walk has met them all,
    the rest of the value is plain JSON and is returned as msgspec built it,
    without visiting it: a typed value early in a large result costs only
    the path to it.
    """

    __slots__ = ("registry", "tags_left")

    def __init__(self, registry: CodecRegistry, text: str) -> None:
        self.registry = registry
        # Every tag key starts with "!", spelled raw or as the escape \u0021
        # (a hand-edited row). The count of raw '"!' may overshoot (a string
        # holding '"!'), which only walks further, and never undershoots.
        self.tags_left = _WALK_ALL if "\\u0021" in text else text.count('"!')

    def _entry_for_name(self, name: str) -> _Entry | None:
        return self.registry._entry_for_name(name)


def _dec(v: Any, reg: _Reading) -> Any:
    """``v`` (fresh from msgspec, so ours to change) with its tags decoded, in place."""
    if reg.tags_left <= 0:
        return v  # every tag is decoded: what is left is plain JSON
    t = type(v)
    if t is dict:
        if len(v) == 1:
            key = next(iter(v))
            if key.startswith(TAG):
                reg.tags_left -= 1
                return _dec_tag(key, v[key], reg)
        return _dec_fields(v, reg)
    if t is list:
        return _dec_items(v, reg)
    return v


def _dec_items(v: list[Any], reg: _Reading) -> list[Any]:
    """A list's items with their tags decoded, in place."""
    return _dec_in_place(v, v, enumerate(v), _index_segment, reg)


def _dec_fields(v: dict[str, Any], reg: _Reading) -> dict[str, Any]:
    """A str-keyed dict's values with their tags decoded, in place (its keys are never tags)."""
    return _dec_in_place(v, v.values(), v.items(), _key_segment, reg)


def _index_segment(i: object) -> str:
    return f"[{i}]"


_Container = TypeVar("_Container", list[Any], dict[str, Any])


def _dec_in_place(
    v: _Container,
    values: Iterable[Any],
    entries: Iterable[tuple[Any, Any]],
    segment: Callable[[Any], str],
    reg: _Reading,
) -> _Container:
    """``v`` (a list or dict) with the tags in ``values`` decoded, assigned back by key or index.

    Assigning to an existing key or index keeps the size (and a dict's
    order), so ``entries`` can be iterated meanwhile.
    """
    if len(v) > _WALK_MAX and set(map(type, values)) <= _SCALARS:
        return v  # holding no tag: used as it is
    k: Any = None
    try:
        for k, x in entries:
            tx = type(x)
            if tx is dict or tx is list:
                y = _dec(x, reg)
                if y is not x:
                    v[k] = y
                if reg.tags_left <= 0:
                    break
    except _Fail as exc:
        exc.parts.append(segment(k))
        raise
    return v


def _dec_tag(key: str, payload: Any, reg: _Reading) -> Any:
    name = key[1:]
    builtin = _BUILTIN_DECODERS.get(name)
    if builtin is not None:
        try:
            return builtin(payload, reg)
        except (_Fail, RecursionError):
            raise
        except Exception as exc:
            raise _Fail(
                f"recorded {name} {_short_repr(payload, 80)} is malformed ({_describe(exc)}); "
                f"the row was edited or written by another program"
            ) from None
    entry = reg._entry_for_name(name)
    if entry is None:
        raise _Fail(
            f"type {name!r} is not registered; import its class and register it with "
            f"letitloop.codec.register(<the class>) (or name={name!r} if it was renamed or "
            f"moved) before reading. Nothing is imported from the journal's data"
        )
    decoded = _dec(payload, reg)
    try:
        return entry.decode(decoded)
    except (_Fail, RecursionError):
        raise
    except Exception as exc:
        raise _Fail(
            f"the decode function registered for {_type_name(entry.cls)} failed: {_describe(exc)}"
        ) from None


def _need(payload: Any, t: type, what: str) -> Any:
    if type(payload) is not t:
        raise _Fail(
            f"recorded {what} holds a {type(payload).__name__}, expected a {t.__name__}; "
            f"the row was edited or written by another program"
        )
    return payload


def _dec_dict(payload: Any, reg: _Reading) -> Any:
    if type(payload) is dict:  # str keys: a top-level dict, or an escaped one
        return _dec_fields(payload, reg)
    out = {}
    for i, pair in enumerate(_need(payload, list, "dict")):
        if type(pair) is not list or len(pair) != 2:
            raise _Fail(f"recorded dict entry {i} is not a [key, value] pair; the row was edited")
        try:
            k = _dec(pair[0], reg)
            out[k] = _dec(pair[1], reg)
        except _Fail as exc:
            exc.parts.append(f"[{_short_repr(pair[0])}]")
            raise
        except TypeError as exc:  # an unhashable key
            raise _Fail(f"recorded dict key is unusable: {exc}") from None
    return out


def _short_repr(v: Any, width: int = 40) -> str:
    """``repr(v)`` cut to ``width``; never raises (it only serves error messages)."""
    if type(v) is int and v.bit_length() > 128:
        return f"<int of {v.bit_length()} bits>"  # (decimal text may be refused, or slow)
    try:
        r = repr(v)
    except Exception:  # a __repr__ that fails, or a value too deep to print
        return f"<{_type_name(type(v))}>"
    return r if len(r) <= width else r[: width - 3] + "..."


def _describe(exc: BaseException) -> str:
    """``ExcType: message`` of an exception a user's code raised; never raises."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return type(exc).__name__


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


def _dec_path(cls: type) -> Callable[[Any, _Reading], Any]:
    def dec(payload: Any, reg: _Reading) -> Any:
        if type(payload) is dict:  # {"!str": [...]}: a name that is not UTF-8
            payload = _dec(payload, reg)
        text = _need(payload, str, cls.__name__)
        try:
            return cls(text)
        except NotImplementedError:
            raise _Fail(
                f"recorded {cls.__name__} {text!r} cannot be rebuilt on this system "
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


def _dec_container(t: type, what: str) -> Callable[[Any, _Reading], Any]:
    def dec(payload: Any, reg: _Reading) -> Any:
        return t(_dec_items(_need(payload, list, what), reg))

    return dec


_BUILTIN_DECODERS: dict[str, Callable[[Any, _Reading], Any]] = {
    "list": lambda p, reg: _dec_items(_need(p, list, "list"), reg),
    "dict": _dec_dict,
    "tuple": _dec_container(tuple, "tuple"),
    "set": _dec_container(set, "set"),
    "frozenset": _dec_container(frozenset, "frozenset"),
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
    "PurePosixPath": _dec_path(pathlib.PurePosixPath),
    "PureWindowsPath": _dec_path(pathlib.PureWindowsPath),
    "PosixPath": _dec_path(pathlib.PosixPath),
    "WindowsPath": _dec_path(pathlib.WindowsPath),
}

#: Python's built-in exception classes (ValueError, KeyError, …), known to
#: every registry under their plain names. A fixed table of classes already
#: loaded: decoding an exception looks its name up here, never imports it.
_BUILTIN_EXCEPTIONS: dict[type, _Entry] = {
    obj: _exception_entry(obj, name)
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
}
for _entry in _BUILTIN_EXCEPTIONS.values():
    _BUILTIN_DECODERS[_entry.name] = (
        lambda p, reg, _e=_entry: _e.decode(_dec(p, reg))  # type: ignore[misc]
    )
del _entry


def _parse(text: str) -> Any:
    """The JSON value of ``text``, as msgspec builds it; a DecodeError if it is not JSON."""
    try:
        return _decoder.decode(text)
    except msgspec.ValidationError:
        # msgspec's word for a decimal int longer than this reader's digit
        # guard (a row from a writer whose guard was off, or higher than
        # ours): read it with json, turning digits into ints without the guard.
        return _parse_long_ints(text)
    except msgspec.DecodeError as exc:
        raise DecodeError(
            f"cannot decode recorded value: {exc}; the row is not JSON text as the codec "
            f"writes it: it was edited or written by another program"
        ) from None


def _parse_long_ints(text: str) -> Any:
    import json

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(text, parse_int=_int_from_digits, parse_constant=refuse)
    except ValueError as exc:  # json.JSONDecodeError too
        raise DecodeError(
            f"cannot decode recorded value: {exc}; the row is not JSON text as the codec "
            f"writes it: it was edited or written by another program"
        ) from None


def _int_from_digits(digits: str) -> int:
    """An int from decimal text of any length (Decimal is spared Python's digit guard)."""
    return int(digits) if len(digits) <= 640 else int(decimal.Decimal(digits))


def _decode(text: str, registry: CodecRegistry) -> Any:
    value = _parse(text)
    if type(value) is not dict or len(value) != 1:
        return value
    key = next(iter(value))
    if not key.startswith(TAG):
        return value
    reg = _Reading(registry, text)
    reg.tags_left -= 1  # the top-level tag
    payload = value[key]
    try:
        if (key == "!dict" and type(payload) is dict and len(payload) != 1) or key == "!list":
            # A top-level container of tagged values (the common case): its
            # payload decodes as an ordinary container, one call instead of four.
            return _dec(_need(payload, list, "list") if key == "!list" else payload, reg)
        return _dec_tag(key, payload, reg)
    except _Fail as exc:
        raise DecodeError(f"cannot decode value at {exc.path()}: {exc.reason}") from None


def decode(text: str, registry: CodecRegistry | None = None) -> Any:
    """The value that :func:`encode` turned into ``text``, with its types.

    Plain JSON comes back from msgspec as it is. In a tagged document every
    tag is looked up among the built-in types and in ``registry`` (the
    default registry when None), nowhere else. A caller too deep in
    recursion to read a deeply nested value gets it read on a fresh thread.
    Raises DecodeError naming the path and the cause: an unregistered type,
    a field that no longer fits its class, text that is not JSON, a value
    nested deeper than this process's recursion limit can read.
    """
    reg = registry if registry is not None else default_registry
    try:
        return _decode(text, reg)
    except RecursionError:
        pass  # the caller's stack is deep: decode again on a fresh one
    try:
        return _on_fresh_stack(_decode, text, reg)
    except RecursionError:
        raise DecodeError(
            f"cannot decode recorded value: it nests {_json_depth(text)} levels deep (as JSON "
            f"text), more than Python's recursion limit ({sys.getrecursionlimit()}) lets this "
            f"process read back, even on a fresh thread. The row itself is intact. Raise the "
            f"limit with sys.setrecursionlimit() before replaying; a value encode accepts "
            f"(at most {MAX_DEPTH} levels) needs about {_FRAMES_PER_LEVEL * MAX_DEPTH} frames"
        ) from None


def _json_depth(text: str) -> int:
    """How deep the arrays and objects of JSON ``text`` nest (strings skipped), iteratively."""
    brackets = re.sub(r'"(?:[^"\\]|\\.)*"', "", text)
    depth = deepest = 0
    for c in brackets:
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest
