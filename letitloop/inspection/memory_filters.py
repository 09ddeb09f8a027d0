"""What a :class:`~letitloop.inspection.inspector.RunFilter` selects among the in-memory
store's runs (:func:`selects`: the conditions ``sqlite_filters.py`` writes in SQL, with
SQL's meaning of ``=`` on the recorded input's JSON), and a prefix as SQLite's ``LIKE``
matches it (:func:`starts_with`)."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

from .inspector_runs import RunFilter


def starts_with(text: str, prefix: str) -> bool:
    """Whether ``text`` starts with ``prefix``, ASCII letters in either case (SQLite's LIKE)."""
    return text[: len(prefix)].lower() == prefix.lower()


def selects(run: dict[str, Any], where: RunFilter) -> bool:
    """Whether ``where`` selects ``run`` (the conditions ``SqliteInspector`` writes in SQL)."""
    if where.goal is not None and run["goal"] != where.goal:
        return False
    if where.statuses is not None and run["status"] not in where.statuses:
        return False
    if where.since is not None and not run["started_at"] >= where.since:
        return False
    if where.until is not None and not run["started_at"] < where.until:
        return False
    if where.name is not None and (
        run["name"] is None or not fnmatch.fnmatchcase(run["name"], where.name)
    ):
        return False
    return all(_input_has(run["input"], parts, value) for parts, value in where.inputs)


def _input_has(text: str | None, parts: tuple[str, ...], value: str) -> bool:
    """Whether the recorded input ``text`` holds ``value`` at ``parts`` (see
    :attr:`RunFilter.inputs`): as recorded, tagged by the codec, or in a wrapped dict."""
    try:
        wanted: Any = json.loads(value)
    except ValueError:
        wanted = value
    try:
        recorded = json.loads(text) if text is not None else None
    except ValueError:
        return False
    for path in (parts, ("!dict", *parts)):
        found = _at(recorded, path)
        if found is _MISSING:
            continue
        if _same(found, wanted):
            return True
        if isinstance(found, dict) and any(
            k.startswith("!") and _same(v, wanted) for k, v in found.items()
        ):
            return True
    return False


_MISSING = object()


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _same(found: Any, wanted: Any) -> bool:
    """SQL's ``=`` between a JSON value and what was asked: no match for null; a container
    only equals a container; text only equals text."""
    if found is None or wanted is None:
        return False
    if isinstance(wanted, (dict, list)) or isinstance(found, (dict, list)):
        return isinstance(found, type(wanted)) and found == wanted
    if isinstance(found, str) or isinstance(wanted, str):
        return isinstance(found, str) and isinstance(wanted, str) and found == wanted
    return bool(found == wanted)
