"""What the saver rebuilds from a row: only types on an allow-list.

LangGraph's ``JsonPlusSerializer`` stores a typed value as "call this
module's attribute with these arguments" and, by default, calls it when the
row is read: a row forged to say ``os.system("…")`` runs that command. Its
strict mode (``LANGGRAPH_STRICT_MSGPACK=true``, or an explicit
``allowed_msgpack_modules``) calls only what is on a list. The saver is
strict by default, whatever the environment says.
"""

from __future__ import annotations

from collections.abc import Iterable

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

#: A type to allow: the class itself, or its ``(module, name)``.
AllowedType = type | tuple[str, str]


def strict_serde(allowed: Iterable[AllowedType] = ()) -> JsonPlusSerializer:
    """LangGraph's msgpack serializer, rebuilding only LangGraph's safe types and ``allowed``.

    LangGraph's own list covers the standard library's value types
    (datetimes, UUID, Decimal, paths, sets, deques, …), LangChain's messages
    and ``Document``, and LangGraph's ``Send``, ``Command``, ``Interrupt`` and
    friends. ``compile()`` adds the types named in the graph's state schema
    (through ``with_allowlist``), so a Pydantic or dataclass state needs
    nothing more. Any other type stored in a row comes back as its recorded
    fields (a dict or list), LangGraph logs a warning naming it, and nothing
    is imported or called. No pickle: a row stored as ``pickle`` is refused.
    """
    modules = tuple(allowed)
    # None (not an empty tuple) is LangGraph's "only the safe types" setting.
    return JsonPlusSerializer(allowed_msgpack_modules=modules or None)
