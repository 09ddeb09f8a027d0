"""What a wait takes: the values ``lil send`` may write into it, checked when they are sent.

``wait_for(name, expect=Expect(schema, about, example))`` records, before the
wait starts, a step row ``expects:<name>`` (numbered like the wait:
``expects:<name>#2`` for the wait ``<name>#2``) whose result is the schema, a
line saying what the wait is for, and an example of a value it takes.
``letitloop.send`` and ``lil send`` read it and refuse a value the schema
does not take with NotWaitingError, writing nothing: a wrong answer (an
approval naming another tool call) is refused when it is sent, instead of
failing the run on every restart. The example is what the one line printed
when a process stops to wait shows (``lil send RUN NAME 'EXAMPLE'``).

The schema is a small part of JSON Schema, enough to name exact values:
``type`` (``boolean``, ``string``, ``number``, ``integer``, ``object``,
``array``, ``null``, or a list of them), ``enum``, ``properties``,
``required``, ``additionalProperties`` (false, or a schema),
``propertyNames`` (a schema for the keys) and ``anyOf``. A keyword outside
that list is refused when the wait starts (MisuseError), never ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import MisuseError
from ..identity.keys import make_key, split_key

#: The prefix of the step row recording what a wait takes: ``expects:approval``.
PREFIX = "expects:"

_KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "properties",
        "required",
        "additionalProperties",
        "propertyNames",
        "anyOf",
        "description",
    }
)

_TYPES: dict[str, tuple[type, ...]] = {
    "boolean": (bool,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "object": (dict,),
    "array": (list, tuple),
    "null": (type(None),),
}


@dataclass(frozen=True)
class Expect:
    """What a wait takes: ``schema`` (see the module's docstring), ``about`` (one line:
    what the wait is for) and ``example`` (a value it takes, shown in the stop line)."""

    schema: dict[str, Any]
    about: str
    example: Any

    def record(self) -> dict[str, Any]:
        """The step's result: plain JSON data, readable in ``lil show``."""
        check_schema(self.schema, "$")
        return {"about": self.about, "schema": self.schema, "example": self.example}


def step_key(wait_key: str) -> str:
    """The key of the row recording what the wait ``wait_key`` takes (same number)."""
    name, n = split_key(wait_key)
    return make_key(PREFIX + name, n)


def example_text(recorded: dict[str, Any]) -> str:
    """The example value of a recorded expectation as ``lil send`` takes it (JSON)."""
    return json.dumps(recorded.get("example"), separators=(", ", ": "))


def check_schema(schema: Any, at: str) -> None:
    """MisuseError for a schema this module does not read (an unknown keyword, a bad type)."""
    if not isinstance(schema, dict):
        raise MisuseError(f"expect= schema at {at}: expected a dict, got {schema!r}")
    unknown = set(schema) - _KEYWORDS
    if unknown:
        raise MisuseError(
            f"expect= schema at {at}: unknown keyword(s) {sorted(unknown)}; this check reads "
            f"only {sorted(_KEYWORDS)}"
        )
    kinds = schema.get("type", [])
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        if kind not in _TYPES:
            raise MisuseError(f"expect= schema at {at}: unknown type {kind!r}")
    for key, sub in schema.get("properties", {}).items():
        check_schema(sub, f"{at}.{key}")
    for sub in schema.get("anyOf", []):
        check_schema(sub, at)
    for word in ("additionalProperties", "propertyNames"):
        sub = schema.get(word)
        if isinstance(sub, dict):
            check_schema(sub, f"{at}[{word}]")


def _shown(value: Any) -> str:
    text = json.dumps(value, default=repr)
    return text if len(text) <= 80 else text[:77] + "..."


def _is(value: Any, kind: str) -> bool:
    if kind in ("number", "integer") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES[kind])


def problem(schema: dict[str, Any], value: Any, at: str = "$") -> str | None:
    """What is wrong with ``value`` for ``schema`` (``$.approvals: ...``), None if nothing."""
    kinds = schema.get("type")
    if kinds is not None:
        allowed = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, k) for k in allowed):
            return f"{at}: expected {' or '.join(allowed)}, got {_shown(value)}"
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(_shown(v) for v in schema["enum"])
        return f"{at}: expected one of {choices}, got {_shown(value)}"
    if "anyOf" in schema:
        found = [problem(sub, value, at) for sub in schema["anyOf"]]
        if all(found):
            return " / ".join(p for p in found if p)
    if isinstance(value, dict):
        return _object_problem(schema, value, at)
    return None


def _object_problem(schema: dict[str, Any], value: dict[str, Any], at: str) -> str | None:
    names = schema.get("propertyNames")
    if names is not None:
        for key in value:
            found = problem(names, key, f"{at} key")
            if found:
                return found
    missing = [k for k in schema.get("required", []) if k not in value]
    if missing:
        return f"{at}: missing {', '.join(_shown(k) for k in missing)}"
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        where = f"{at}.{key}" if key.isidentifier() else f"{at}[{_shown(key)}]"
        if key in properties:
            found = problem(properties[key], item, where)
        elif extra is False:
            allowed = ", ".join(_shown(k) for k in properties) or "none"
            return f"{at}: unexpected key {_shown(key)} (allowed: {allowed})"
        elif isinstance(extra, dict):
            found = problem(extra, item, where)
        else:
            found = None
        if found:
            return found
    return None
