"""How each registered class is encoded and rebuilt: :class:`Entry`, one per kind of class.

Dataclasses, NamedTuples and ``msgspec.Struct`` classes are records of named
fields and share one entry; Pydantic models, enums and exceptions have their
own. The table of Python's built-in exceptions lives here too: every
registry knows them.
"""

from __future__ import annotations

import builtins
import enum
import sys
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from ..errors import error_text
from .failures import _Fail, _short_repr, _type_name


class Entry:
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
        raise _Fail(f"rebuilding {_type_name(cls)} failed: {error_text(exc)}") from None


def _fields_entry(
    cls: type,
    name: str,
    names: tuple[str, ...],
    required: tuple[str, ...],
    *,
    positional: bool = False,
) -> Entry:
    """The entry of a record class: its ``names`` fields, of which ``required`` have no default.

    Encoded as an object of fields (read by attribute, or by position for a
    tuple); rebuilt by calling the class with them as keywords.
    """
    if positional:

        def enc(v: Any) -> Any:
            return dict(zip(names, v, strict=True))

    else:

        def enc(v: Any) -> Any:
            return {n: getattr(v, n) for n in names}

    def dec(payload: Any) -> Any:
        return _construct(cls, _check_fields(cls, payload, names, required))

    return Entry(cls, name, enc, dec)


def _dataclass_entry(cls: type, name: str) -> Entry:
    import dataclasses  # loaded already: cls is a dataclass (_is_dataclass)

    fields = [f for f in dataclasses.fields(cls) if f.init]
    required = tuple(
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    return _fields_entry(cls, name, tuple(f.name for f in fields), required)


def _namedtuple_entry(cls: type, name: str) -> Entry:
    names: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    defaults: dict[str, Any] = cls._field_defaults  # type: ignore[attr-defined]
    required = tuple(n for n in names if n not in defaults)
    return _fields_entry(cls, name, names, required, positional=True)


def _struct_entry(cls: type, name: str) -> Entry:
    info = msgspec.structs.fields(cls)
    required = tuple(f.name for f in info if f.required)
    return _fields_entry(cls, name, tuple(f.name for f in info), required)


def _pydantic_entry(cls: Any, name: str) -> Entry:
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
            raise _Fail(f"rebuilding {_type_name(cls)} failed: {error_text(exc)}") from None

    return Entry(cls, name, enc, dec)


def _enum_entry(cls: Any, name: str) -> Entry:
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

    return Entry(cls, name, enc, dec)


def _exception_entry(cls: Any, name: str) -> Entry:
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
            raise _Fail(f"rebuilding {_type_name(cls)} failed: {error_text(err)}") from None
        return exc

    return Entry(cls, name, enc, dec)


def _is_pydantic_model(cls: type) -> bool:
    # Only look if pydantic is already imported: a class cannot be a
    # pydantic model otherwise, and the core never imports pydantic itself.
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None) if pydantic is not None else None
    return base is not None and isinstance(cls, type) and issubclass(cls, base)


def _is_dataclass(cls: type) -> bool:
    # Only the dataclasses module makes a dataclass, so a program that never
    # loaded it has none, and `import letitloop` does not load it (with inspect).
    dataclasses = sys.modules.get("dataclasses")
    return dataclasses is not None and isinstance(cls, type) and dataclasses.is_dataclass(cls)


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields") and hasattr(cls, "_asdict")


def _how_to_register(t: type) -> str:
    """The registration call a user should write for ``t`` (used in error messages); for a
    Pydantic model or a dataclass, also the plain value to return instead (an SDK's reply
    is often one: its user wants the data, not the class back)."""
    kind = _registrable_kind(t)
    name = t.__qualname__
    if kind == "pydantic":
        return (
            f"letitloop.codec.register({name}) to get {name} back on replay, or return "
            f"plain data instead: value.model_dump(), or the part you need (an SDK reply's "
            f"text, say)"
        )
    if kind == "dataclass":
        return (
            f"letitloop.codec.register({name}) to get {name} back on replay, or return "
            f"plain data instead: dataclasses.asdict(value)"
        )
    if kind is not None:
        return f"letitloop.codec.register({name})"
    return (
        f"letitloop.codec.register({t.__qualname__}, encode=..., decode=...) "
        f"(encode returns an encodable value, decode rebuilds the object from it)"
    )


def _registrable_kind(cls: type) -> str | None:
    if isinstance(cls, type) and issubclass(cls, BaseException):
        return "exception"
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return "enum"
    if _is_dataclass(cls):
        return "dataclass"
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        return "struct"
    if isinstance(cls, type) and _is_namedtuple(cls):
        return "namedtuple"
    if _is_pydantic_model(cls):
        return "pydantic"
    return None


_KIND_ENTRY: dict[str, Callable[[Any, str], Entry]] = {
    "exception": _exception_entry,
    "enum": _enum_entry,
    "dataclass": _dataclass_entry,
    "struct": _struct_entry,
    "namedtuple": _namedtuple_entry,
    "pydantic": _pydantic_entry,
}


def default_entry(cls: type, name: str) -> Entry | None:
    """The entry ``register(cls, name=name)`` would make (not registered); None: it needs encode=.

    Dataclasses, NamedTuples, enums, ``msgspec.Struct`` classes, Pydantic
    models and exceptions: the fingerprint reads an unregistered one of them
    by its fields, as the codec would store it.
    """
    kind = _registrable_kind(cls)
    return None if kind is None else _KIND_ENTRY[kind](cls, name)


#: Python's built-in exception classes (ValueError, KeyError, …), known to
#: every registry under their plain names. A fixed table of classes already
#: loaded: decoding an exception looks its name up here, never imports it.
_BUILTIN_EXCEPTIONS: dict[type, Entry] = {
    obj: _exception_entry(obj, name)
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
}
