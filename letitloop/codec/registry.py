"""The registry of user classes: :class:`CodecRegistry`, the default one and :func:`register`.

A registry maps each registered class to its entry (``entries.py``) and each
stored name back to it; decoding looks a tag up here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .document import TAG
from .entries import _BUILTIN_EXCEPTIONS, _KIND_ENTRY, Entry, _registrable_kind
from .escape import _str_parts
from .failures import _type_name
from .tags import _BUILTIN_NAMES, _BUILTIN_TYPES, is_path_type

T = TypeVar("T")

#: Names no registered class may take: the built-in tags and exceptions.
_RESERVED_NAMES = _BUILTIN_NAMES | {e.name for e in _BUILTIN_EXCEPTIONS.values()}


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
        self._by_type: dict[type, Entry] = {}
        self._by_name: dict[str, Entry] = {}
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
        if cls in _BUILTIN_TYPES or cls in (str, int, bool, type(None)) or is_path_type(cls):
            raise TypeError(
                f"{_type_name(cls)} is built in: the codec encodes it without registration"
            )
        if (encode is None) != (decode is None):
            raise TypeError("register() takes encode= and decode= together, or neither")
        name = name if name is not None else f"{cls.__module__}.{cls.__qualname__}"
        if encode is not None and decode is not None:
            entry = Entry(cls, name, encode, decode)
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
            if not n or n in _RESERVED_NAMES or n.startswith(TAG):
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

    def _entry_for_type(self, t: type) -> Entry | None:
        reg: CodecRegistry | None = self
        while reg is not None:
            entry = reg._by_type.get(t)
            if entry is not None:
                return entry
            reg = reg.extends
        return _BUILTIN_EXCEPTIONS.get(t)

    def _entry_for_name(self, name: str) -> Entry | None:
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
