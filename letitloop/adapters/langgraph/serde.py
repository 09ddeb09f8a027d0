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
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import sys
from collections.abc import Callable, Iterable
from typing import Any

from langgraph.checkpoint.serde import jsonplus as _jsonplus
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

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
