"""What the saver rebuilds from a row: only types on an allow-list.

LangGraph's ``JsonPlusSerializer`` stores a typed value as "call this
module's attribute with these arguments" and, by default, calls it when the
row is read: a row forged to say ``os.system("…")`` runs that command. Its
strict mode (``LANGGRAPH_STRICT_MSGPACK=true``, or an explicit
``allowed_msgpack_modules``) calls only what is on a list. The saver is
strict by default, whatever the environment says.

LangGraph's strict mode also needs the graph's own state types on the list,
and ``compile()`` adds them only when the environment variable is set. So the
saver's list also admits, by kind, the **data classes of modules the program
has already imported**: dataclasses, Pydantic models, NamedTuples and enums.
A row can name such a class (the program's own state types after a restart)
but never a function, never any other class (``subprocess.Popen``), and
never a module that is not loaded yet: nothing is imported because a row
says so.

The same list rules every row type. ``msgpack`` rows go through LangGraph's
reader with the list above. ``json`` rows (LangGraph's format before
msgpack, LangChain's ``{"lc": 1 | 2, "type": "constructor", "id": [...]}``
objects) are read here: a constructor whose class is on the list is built
as LangGraph builds it; any other comes back as its recorded fields and
nothing is imported (LangGraph itself builds every class of LangChain's
"core" list from such a row, ``PromptTemplate`` and ``RunnablePassthrough``
included, importing their modules). ``null``, ``bytes`` and ``bytearray``
rows build nothing; ``pickle`` and any other tag are refused.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import importlib
import json
import logging
import sys
from collections.abc import Callable, Iterable
from typing import Any

from langgraph.checkpoint.serde import _msgpack as _lg_msgpack
from langgraph.checkpoint.serde import jsonplus as _jsonplus
from langgraph.checkpoint.serde.jsonplus import LC_REVIVER, JsonPlusSerializer

from ...primitives import forksafe

logger = logging.getLogger(__name__)

#: The function JsonPlusSerializer builds its reader with (private in
#: langgraph-checkpoint 4.3); None in a release that moved it, and then the
#: list is LangGraph's strict one, by name only.
_make_reader: Callable[[Any], Any] | None = getattr(_jsonplus, "_create_msgpack_ext_hook", None)

#: A type to allow: the class itself, or its ``(module, name)``.
AllowedType = type | tuple[str, str]


def is_data_class(cls: object) -> bool:
    """Whether ``cls`` is a data class: a dataclass, Pydantic model, NamedTuple or enum."""
    if not isinstance(cls, type):
        return False
    if dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum):
        return True
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return True
    for module, base in (("pydantic", "BaseModel"), ("pydantic.v1", "BaseModel")):
        loaded = sys.modules.get(module)
        model = getattr(loaded, base, None) if loaded is not None else None
        if isinstance(model, type) and issubclass(cls, model):
            return True
    return False


class _AllowList(frozenset[tuple[str, ...]]):
    """The named ``(module, name)`` pairs, and any data class of an already imported module."""

    def __contains__(self, key: object) -> bool:
        if frozenset.__contains__(self, key):
            return True
        if not (isinstance(key, tuple) and len(key) == 2):
            return False
        module = sys.modules.get(str(key[0]))
        if module is None:
            return False  # never imported because a row names it
        # The module's dict, not getattr: a module-level __getattr__ is code.
        return is_data_class(vars(module).get(str(key[1])))


def _keys(allowed: Iterable[AllowedType]) -> set[tuple[str, ...]]:
    keys: set[tuple[str, ...]] = set()
    for item in allowed:
        if isinstance(item, type):
            keys.add((item.__module__, item.__name__))
        else:
            keys.add(tuple(item))
    return keys


# -- json rows ----------------------------------------------------------------------

#: Kinds of blocked class already warned about (bounded, like LangGraph's own).
_warned: set[tuple[str, str]] = set()
_warned_lock = forksafe.lock()


def _warn_blocked(key: tuple[str, str]) -> None:
    with _warned_lock:
        if key in _warned or len(_warned) >= 1000:
            return
        _warned.add(key)
    logger.warning(
        "Blocked deserialization of %s.%s from a json checkpoint row: not on the saver's "
        "allow-list; it comes back as its recorded fields. Allow it with "
        "LetItLoopCheckpointSaver(allowed_types=[(%r, %r)])",
        *key,
        *key,
    )


def _constructor_target(value: dict[str, Any]) -> tuple[str, str] | None:
    """``(module, name)`` of the class a LangChain constructor object names, without importing.

    ``lc: 1`` ids go through LangChain's own mapping of old names (what its
    reviver would import); ``lc: 2`` ids are the module path and the name.
    None when the id is not a list of at least two strings.
    """
    ids = value.get("id")
    if not (isinstance(ids, list) and len(ids) >= 2 and all(isinstance(i, str) for i in ids)):
        return None
    path = tuple(ids)
    if value.get("lc") == 1:
        path = tuple(LC_REVIVER.import_mappings.get(path, path))
    return ".".join(path[:-1]), path[-1]


def _recorded_fields(value: dict[str, Any]) -> Any:
    """What a constructor object that is not built comes back as: its arguments."""
    kwargs, args = value.get("kwargs"), value.get("args")
    if kwargs and args:
        return {"args": args, "kwargs": kwargs}
    return kwargs if kwargs is not None else args if args is not None else {}


def _build_lc2(module: str, name: str, value: dict[str, Any]) -> Any:
    """An ``lc: 2`` constructor on the list, built as LangGraph builds it."""
    cls = getattr(importlib.import_module(module), name)
    if isinstance(cls, type) and issubclass(cls, BaseException):
        return None
    args, kwargs = value.get("args") or [], value.get("kwargs") or {}
    return cls(*args, **kwargs)


class StrictSerializer(JsonPlusSerializer):
    """``JsonPlusSerializer`` whose allow-list also admits imported data classes (see the module).

    Built by :func:`strict_serde`. ``with_msgpack_allowlist`` (what
    ``compile()`` calls under ``LANGGRAPH_STRICT_MSGPACK=true``) keeps that rule.
    """

    def __init__(self, allowed: Iterable[AllowedType] = ()) -> None:
        keys = _keys(allowed)
        super().__init__(allowed_msgpack_modules=tuple(keys) or None)
        self._use(keys)

    def _use(self, keys: set[tuple[str, ...]]) -> None:
        if _make_reader is None:  # pragma: no cover
            return
        allow: Any = _AllowList(keys)
        self._allowed_msgpack_modules = allow
        self._unpack_ext_hook = _make_reader(allow)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """The value of a row; a ``json`` row is read with the allow-list (see the module)."""
        type_, payload = data
        if type_ == "json":
            return json.loads(payload, object_hook=self._json_object)
        return super().loads_typed(data)

    def _json_object(self, value: dict[str, Any]) -> Any:
        if value.get("type") != "constructor" or value.get("lc") not in (1, 2):
            # Plain data, or LangChain's "secret" / "not_implemented" markers:
            # kept as they are (LangGraph's reader makes a secret None and
            # raises for "not_implemented"; neither builds anything).
            return value
        key = _constructor_target(value)
        if key is None:
            return value
        listed = self._allowed_msgpack_modules
        on_list = listed is True or (listed is not None and key in listed)
        if key not in _lg_msgpack.SAFE_MSGPACK_TYPES and not on_list:
            _warn_blocked(key)
            return _recorded_fields(value)
        try:
            if value.get("lc") == 1:
                return LC_REVIVER(value)
            return _build_lc2(*key, value)
        except Exception as exc:
            logger.warning(
                "Could not rebuild %s.%s from a json checkpoint row (%s); it comes back as "
                "its recorded fields",
                *key,
                type(exc).__name__,
            )
            return _recorded_fields(value)

    def with_msgpack_allowlist(
        self, extra_allowlist: Iterable[tuple[str, ...] | type]
    ) -> JsonPlusSerializer:
        """A copy whose list also names ``extra_allowlist``."""
        current = self._allowed_msgpack_modules
        keys = set(current) if isinstance(current, (set, frozenset)) else set()
        merged = keys | _keys(extra_allowlist)  # type: ignore[arg-type]
        if merged == keys:
            return self
        clone = copy.copy(self)
        clone._use(merged)
        return clone


def strict_serde(allowed: Iterable[AllowedType] = ()) -> StrictSerializer:
    """LangGraph's msgpack serializer that rebuilds only types on an allow-list.

    On the list: LangGraph's own (the standard library's value types:
    datetimes, UUID, Decimal, paths, sets, deques…; LangChain's messages and
    ``Document``; LangGraph's ``Send``, ``Command``, ``Interrupt``…), the
    ``allowed`` classes or ``(module, name)`` pairs, and the data classes of
    modules already imported (see the module docstring). Any other type a
    row names comes back as its recorded fields (a dict or list), LangGraph
    logs a warning naming it, and nothing is imported or called. No pickle:
    a row stored as ``pickle`` is refused.
    """
    return StrictSerializer(allowed)
