"""Fingerprint functions of the user's classes: how to tell apart values the codec cannot encode.

:func:`register_fingerprint` (public as ``letitloop.register_fingerprint``)
records one function per class; :func:`hook_for` finds the one a value's
class resolved to (its own, or a base class's), which ``canon.py`` asks
before anything else.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from ..codec.tags import SCALAR_TYPES, is_path_type
from .unchecked import Unchecked

T = TypeVar("T")

#: Registered fingerprint functions: class -> (name, function).
_hooks: dict[type, tuple[str, Callable[[Any], Any]]] = {}
#: The name (the registered class's, or ``name/module.QualName`` for a subclass) and
#: function each class resolved to, or None; cleared on register. (Weak: classes made
#: at run time, a dataclass per call say, are not kept alive.)
_hook_of: weakref.WeakKeyDictionary[type, tuple[str, Callable[[Any], Any]] | None] = (
    weakref.WeakKeyDictionary()
)

#: Built-in types: their fingerprint is fixed, no function may replace it.
_BUILTIN = frozenset(
    {str, int, float, bool, type(None), bytes, list, dict, tuple, set, frozenset, Unchecked}
)


def register_fingerprint(
    cls: type[T], fn: Callable[[T], Any], *, name: str | None = None
) -> type[T]:
    """Tell values of ``cls`` (and its subclasses) apart by ``fn(value)``; returns ``cls``.

    ``fn`` returns what identifies the value, itself fingerprinted exactly:
    anything the codec can encode, or other values with a fingerprint
    (``register_fingerprint(Client, lambda c: c.base_url)``). Two values are
    then the same argument when their classes' names and ``fn``'s results
    are. ``name`` replaces ``module.QualName`` in the fingerprint, so that
    moving the class keeps recorded runs' fingerprints (a subclass counts
    as ``name/module.QualName`` of its own). A registered function takes
    precedence over the codec's own way of telling values of ``cls`` apart.
    Applies to every journal of the process; registering a class again
    replaces its function. Raises TypeError for a built-in type, ValueError
    for a name another class registered.
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_fingerprint() takes a class, got {cls!r}")
    if cls in _BUILTIN or cls in SCALAR_TYPES or is_path_type(cls):
        raise TypeError(f"{_type_name(cls)} is built in: its values are told apart exactly already")
    name = name if name is not None else _type_name(cls)
    for other, (taken, _) in _hooks.items():
        if taken == name and other is not cls:
            raise ValueError(
                f"the fingerprint name {name!r} is already registered for {_type_name(other)}; "
                f"pass a different name= for {_type_name(cls)}"
            )
    _hooks[cls] = (name, fn)
    _hook_of.clear()
    return cls


def hook_for(t: type) -> tuple[str, Callable[[Any], Any]] | None:
    try:
        return _hook_of[t]
    except KeyError:
        pass
    found = None
    for base in t.__mro__:
        hook = _hooks.get(base)
        if hook is not None:
            found = hook if base is t else (f"{hook[0]}/{_type_name(t)}", hook[1])
            break
    _hook_of[t] = found
    return found


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"
