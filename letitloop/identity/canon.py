"""The canonical form of a value: what its fingerprint hashes.

See ``fingerprint.py`` for what it tells apart. :func:`canonical` turns a
value into bytes that msgspec's MessagePack encoder writes in one way only:
plain values as they are, every other value as an extension type (a code
per kind) around its parts' bytes, sets' items and dicts' entries sorted by
their bytes. A class's fingerprint function (``fingerprint_hooks.py``)
comes first, then the codec's own way to store the value.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from ..codec import MAX_DEPTH
from ..codec.entries import default_entry
from ..codec.plain import plain_tree
from ..codec.tags import scalar_tag
from ..errors import FingerprintError
from .fingerprint_hooks import hook_for
from .unchecked import Unchecked, unwrappable

if TYPE_CHECKING:
    from ..codec import CodecRegistry
    from ..codec.entries import Entry


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


# -- the canonical tree ------------------------------------------------------------

_Ext = msgspec.msgpack.Ext
#: MessagePack with dict keys sorted: a plain value's canonical bytes (the fast path).
pack = msgspec.msgpack.Encoder(order="deterministic").encode

# Extension codes: one per kind of tagged value. Plain values never produce an
# extension, so a tagged value never equals a plain one.
_INT, _STR, _LEAF, _TUPLE, _SET, _FROZENSET, _DICT, _UNCHECKED = 1, 2, 3, 4, 5, 6, 7, 8
_REGISTERED, _RECORD, _HOOK, _ARRAY, _NPSCALAR, _SUBCLASS, _NAMED, _PARTIAL = (
    9, 10, 11, 12, 13, 14, 15, 16,
)  # fmt: skip
_METHOD, _OPAQUE = 17, 18
_TILDE = _Ext(_UNCHECKED, b"")

#: The unwrappable kinds of objects: their fields are attributes that :func:`unwrap` can replace.
_NAMED_KINDS = (types.FunctionType, types.BuiltinFunctionType, type)


class NoFingerprint(Exception):
    """Internal: a part with no fingerprint; containers add their path segment on the way out."""

    def __init__(self, t: type, reason: str, advice: str | None = None) -> None:
        super().__init__(reason)
        self.type = t
        #: Why the part has no fingerprint (or cannot be passed on).
        self.reason = reason
        #: What to do; None: the usual ways (register a fingerprint, unchecked(), run=).
        self.advice = advice
        self.parts: list[str] = []

    def path(self, top: str = "$") -> str:
        return top + "".join(reversed(self.parts))


class _Walk:
    """One fingerprint's walk: its registry and what it met on the way."""

    __slots__ = ("careful", "reg", "strict", "tildes")

    def __init__(self, reg: CodecRegistry, strict: bool, careful: bool) -> None:
        self.reg = reg
        #: Whether a part with no fingerprint stops the walk (else it counts by its type).
        self.strict = strict
        #: Whether strs are checked for lone surrogates (the second pass, when msgpack refused one).
        self.careful = careful
        #: How many unchecked() parts were met.
        self.tildes = 0


def _seg(key: object) -> str:
    if type(key) is str and key.isidentifier():
        return f".{key}"
    try:
        r = repr(key)
    except Exception:
        r = f"<{_type_name(type(key))}>"
    return f"[{r if len(r) <= 40 else r[:37] + '...'}]"


def _canon(v: Any, w: _Walk, left: int, reach: bool) -> Any:
    """``v`` as a tree msgspec encodes in one way only: plain values as they are, others tagged.

    ``left`` is how many levels of containers may still open; ``reach`` says
    whether :func:`unwrap` reaches this part (an ``unchecked()`` elsewhere
    could not be taken off before the call, so it stops the walk).
    """
    t = type(v)
    if t is str:
        if w.careful and not v.isascii():
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return _Ext(_STR, v.encode("utf-8", "surrogatepass"))
        return v
    if t is int:
        if -0x8000000000000000 <= v <= 0xFFFFFFFFFFFFFFFF:
            return v
        return _Ext(_INT, pack(format(v, "x")))  # hex: exact, free of the digit guard
    if t is float:
        if v - v == 0.0:
            return v
        return _Ext(_LEAF, pack("nan" if v != v else "inf" if v > 0 else "-inf"))
    if t is bool or v is None or t is bytes:
        return v
    left -= 1
    if left < 0:
        raise NoFingerprint(
            t,
            f"the value nests more than {MAX_DEPTH} levels deep, or contains itself",
            "pass a flatter value, or one without cycles",
        )
    if t is list:
        return _canon_items(v, w, left, reach)
    if t is dict:
        return _canon_dict(v, w, left, reach)
    if t is tuple:
        return _Ext(_TUPLE, pack(_canon_items(v, w, left, reach)))
    if t is set or t is frozenset:
        return _Ext(_SET if t is set else _FROZENSET, pack(_sorted_items(v, w, left, reach)))
    if t is Unchecked:
        if not reach:
            raise NoFingerprint(
                t,
                "it sits inside a value letitloop does not rebuild (lists, dicts, tuples, sets "
                "and the fields of dataclasses, NamedTuples, msgspec.Structs and Pydantic "
                "models are rebuilt), so the function would receive the wrapper",
                "wrap the whole value in letitloop.unchecked(), or move the part into a list "
                "or dict",
            )
        w.tildes += 1
        return _TILDE
    tag = scalar_tag(v)
    if tag is not None:
        return _Ext(_LEAF, _json(tag))
    return _canon_object(v, t, w, left, reach)


def _canon_items(v: Any, w: _Walk, left: int, reach: bool) -> list[Any]:
    out: list[Any] = []
    append = out.append
    try:
        for x in v:
            tx = type(x)
            if tx is str or tx is int or tx is bool or x is None:
                if (tx is int and not -0x8000000000000000 <= x <= 0xFFFFFFFFFFFFFFFF) or (
                    tx is str and w.careful
                ):
                    x = _canon(x, w, left, reach)
                append(x)
            else:
                append(_canon(x, w, left, reach))
    except NoFingerprint as exc:
        exc.parts.append(f"[{len(out)}]")
        raise
    return out


def _canon_dict(v: dict[Any, Any], w: _Walk, left: int, reach: bool) -> Any:
    out: dict[str, Any] = {}
    k: Any = None
    try:
        for k, x in v.items():
            if type(k) is not str or (w.careful and not k.isascii() and _lone(k)):
                break
            out[k] = _canon(x, w, left, reach)
        else:
            return out
    except NoFingerprint as exc:
        exc.parts.append(_seg(k))
        raise
    # A key that is not a str (or holds a lone surrogate): entries sorted by their bytes.
    pairs = []
    for k, x in v.items():
        try:
            pairs.append(pack([_canon(k, w, left, reach), _canon(x, w, left, reach)]))
        except NoFingerprint as exc:
            exc.parts.append(_seg(k))
            raise
    pairs.sort()
    return _Ext(_DICT, pack(pairs))


def _lone(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _sorted_items(v: Any, w: _Walk, left: int, reach: bool) -> list[bytes]:
    out = []
    for x in v:
        try:
            out.append(pack(_canon(x, w, left, reach)))
        except NoFingerprint as exc:
            exc.parts.append(f"[{_seg(x)[1:-1] if type(x) is not str else repr(x)}]")
            raise
    out.sort()
    return out


def _json(tag: Any) -> bytes:
    """The codec's JSON text of a built-in value's tag (its exact repr for a non-UTF-8 path)."""
    try:
        return msgspec.json.encode(tag)
    except UnicodeEncodeError:
        return repr(tag).encode("utf-8", "backslashreplace")


#: Entries of unregistered record classes, enums and exceptions, by class (None: not one).
#: (A plain dict: an entry refers to its class, so a weak one would keep it all the same.)
_records: dict[type, Entry | None] = {}


def _canon_object(v: Any, t: type, w: _Walk, left: int, reach: bool) -> Any:
    """A value of a type other than the plain ones and the codec's built-in tags."""
    hook = hook_for(t)
    if hook is not None:
        name, fn = hook
        try:
            made = fn(v)
        except Exception as exc:
            raise FingerprintError(
                f"the fingerprint function registered for {_type_name(t)} ({name!r}) raised "
                f"{type(exc).__name__}: {exc}",
                type_name=_type_name(t),
            ) from exc
        return _Ext(_HOOK, pack([name, _canon(made, w, left, False)]))
    entry = w.reg._entry_for_type(t)
    if entry is not None:
        return _Ext(_REGISTERED, pack([entry.name, _fields(v, entry, w, left, reach)]))
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(v, (numpy.ndarray, numpy.generic)):
        return _canon_numpy(v, t, numpy, w, left)
    try:
        entry = _records[t]
    except KeyError:
        entry = _records[t] = default_entry(t, _type_name(t))
    if entry is not None:
        return _Ext(_RECORD, pack([entry.name, _fields(v, entry, w, left, reach)]))
    for base in (str, int, float, bytes, list, tuple, dict, set, frozenset):
        if isinstance(v, base):
            state = getattr(v, "__dict__", None)
            inner = [
                _type_name(t),
                _canon(_BASE_COPY[base](v), w, left + 1, False),
                _canon(dict(state), w, left, False) if state else None,
            ]
            return _Ext(_SUBCLASS, pack(inner))
    if isinstance(v, _NAMED_KINDS):
        module = getattr(v, "__module__", None)
        qualname = getattr(v, "__qualname__", None)
        if type(module) is str and type(qualname) is str and "<" not in qualname:
            return _Ext(_NAMED, pack(f"{module}.{qualname}"))
        return _opaque(
            v,
            t,
            w,
            "a function or class made inside another function (or a lambda) is not told "
            "apart by its name from another made by the same code",
            "define it at module level, or pass it as letitloop.unchecked(value) to leave it "
            "out of the identity",
        )
    if t is partial:
        inner = [_canon(v.func, w, left, False), _canon(v.args, w, left, False)]
        inner.append(_canon(v.keywords, w, left, False))
        return _Ext(_PARTIAL, pack(inner))
    if t is types.MethodType:
        inner = [_canon(v.__self__, w, left, False), _canon(v.__func__, w, left, False)]
        return _Ext(_METHOD, pack(inner))
    return _opaque(v, t, w, "letitloop has no way to tell it from another value of its type")


#: A built-in type's own value of an instance of a subclass, without calling its overrides.
_BASE_COPY: dict[type, Callable[[Any], Any]] = {
    str: str.__str__,
    int: int.__index__,
    float: float.__float__,
    bytes: lambda v: b"" + v,
    list: list.copy,
    tuple: lambda v: tuple(iter(v)),
    dict: dict.copy,
    set: set.copy,
    frozenset: lambda v: frozenset(iter(v)),
}


def _opaque(v: Any, t: type, w: _Walk, why: str, advice: str | None = None) -> Any:
    if w.strict:
        raise NoFingerprint(t, why, advice)
    return _Ext(_OPAQUE, pack(_type_name(t)))


def _fields(v: Any, entry: Entry, w: _Walk, left: int, reach: bool) -> Any:
    """An object's payload (as the codec stores it), walked; its fields reachable if they are."""
    try:
        payload = entry.encode(v)
    except Exception as exc:
        raise FingerprintError(
            f"the codec's encode function for {_type_name(type(v))} raised "
            f"{type(exc).__name__}: {exc}",
            type_name=_type_name(type(v)),
        ) from exc
    if type(payload) is not dict or not (reach and unwrappable(type(v))):
        return _canon(payload, w, left + 1, False)
    out: dict[Any, Any] = {}
    k: Any = None
    try:
        for k, x in payload.items():
            if type(k) is not str or (w.careful and _lone(k)):
                return _canon(payload, w, left + 1, False)
            # A field unwrap() can replace: the payload holds the attribute itself.
            out[k] = _canon(x, w, left, getattr(v, k, _canon) is x)
    except NoFingerprint as exc:
        exc.parts.append(_seg(k))
        raise
    return out


def _canon_numpy(v: Any, t: type, numpy: Any, w: _Walk, left: int) -> Any:
    """A numpy array (dtype, shape, bytes; items for an object array) or scalar (dtype, bytes)."""
    dtype = v.dtype
    if dtype.hasobject:
        items = _canon(v.tolist(), w, left + 1, False)
        return _Ext(_ARRAY, pack([_type_name(t), dtype.str, list(v.shape), items]))
    if isinstance(v, numpy.generic):
        return _Ext(_NPSCALAR, pack([_type_name(t), dtype.str, v.tobytes()]))
    data = v.tobytes()  # C order, whatever the array's layout: equal arrays give equal bytes
    return _Ext(_ARRAY, pack([_type_name(t), dtype.str, list(v.shape), data]))


def canonical(value: Any, registry: CodecRegistry, strict: bool) -> tuple[bytes, int]:
    """``value``'s canonical bytes, and how many ``unchecked()`` parts it holds.

    A plain value (the codec's plain scan says so) is its own canonical
    form: msgspec writes it at once. ``strict``: a part with no fingerprint
    raises NoFingerprint (with its path); otherwise it counts by its type.
    """
    t = type(value)
    if t is str or t is int or t is bool or t is bytes or value is None:
        try:
            return pack(value), 0
        except (OverflowError, UnicodeEncodeError):
            pass  # an int beyond 64 bits, a lone surrogate: tagged below
    elif t is float:
        if value - value == 0.0:
            return pack(value), 0
    elif (t is dict or t is list) and plain_tree(value, MAX_DEPTH):
        try:
            return pack(value), 0
        except (OverflowError, UnicodeEncodeError):
            pass
    walk = _Walk(registry, strict, careful=False)
    try:
        try:
            return pack(_canon(value, walk, MAX_DEPTH + 1, True)), walk.tildes
        except UnicodeEncodeError:
            pass  # a lone surrogate: this time, every str is checked
        walk = _Walk(registry, strict, careful=True)
        return pack(_canon(value, walk, MAX_DEPTH + 1, True)), walk.tildes
    except RecursionError:
        raise NoFingerprint(
            t, "the caller's stack is too deep to walk it", "call the step from a shallower stack"
        ) from None
