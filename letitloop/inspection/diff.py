"""``lil diff``: two runs compared row by row, by key.

A row of one run is matched with the row of the other that has the same
key (``fetch``, ``fetch#2``, ``outer/fetch``). What differs, in the order of
the first run's rows, then the second's new ones:

- ``added``: a key only the second run has; ``removed``: only the first;
- ``kind``: a step in one, a marker, sleep or wait in the other;
- ``function``: recorded by another function;
- ``arguments``: another fingerprint of the arguments (which ones, in words;
  the journal keeps a digest of each argument, not its value);
- ``status``: done in one, failed (or still running, waiting) in the other;
- ``result``: another result, with a short diff of the decoded values
  (the paths that differ, at most :data:`MAX_PATHS`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..identity.fingerprint import differences, same_digest
from ..identity.step_names import same_function
from ..stores.sqlite.store import Store
from .detail import run_rows
from .inspector import Inspector
from .listing import find_run
from .records import RowInfo, RunInfo
from .results import decode_result
from .sqlite_inspector import as_inspector

#: Paths a result's diff names at most; the rest are counted.
MAX_PATHS = 5
#: Paths a result's diff looks for at most (a huge result is not walked whole).
MAX_WALKED = 100
#: Characters of one value a diff shows at most.
MAX_VALUE_CHARS = 60


@dataclass(frozen=True)
class Difference:
    """One way a row differs between the two runs."""

    key: str
    change: str
    """``added``, ``removed``, ``kind``, ``function``, ``arguments``, ``status``, ``result``."""
    a: str | None
    """What the first run has (a function's name, a status, a kind; None: nothing)."""
    b: str | None
    """What the second run has."""
    detail: str = ""
    """In words: which arguments differ, or the result's short value diff."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunDiff:
    """Two runs compared: their differences, and how many rows are the same in both."""

    a: RunInfo
    b: RunInfo
    differences: list[Difference] = field(default_factory=list)
    same: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "a": {"id": self.a.id, "goal": self.a.goal, "name": self.a.name},
            "b": {"id": self.b.id, "goal": self.b.goal, "name": self.b.name},
            "same": self.same,
            "differences": [d.as_dict() for d in self.differences],
        }


def diff_runs(inspector: Inspector | Store, ref_a: str, ref_b: str) -> RunDiff:
    """The runs ``ref_a`` and ``ref_b`` name (as ``lil show`` finds them), compared by key.

    Raises RunNotFoundError when either names no run. Two runs of different
    goals are compared all the same (a goal renamed between them).
    """
    journal = as_inspector(inspector)
    a, b = find_run(journal, ref_a), find_run(journal, ref_b)
    rows_a = {r.key: r for r in run_rows(journal, a)}
    rows_b = {r.key: r for r in run_rows(journal, b)}
    found: list[Difference] = []
    same = 0
    for key, row in rows_a.items():
        other = rows_b.get(key)
        if other is None:
            found.append(Difference(key, "removed", _what(row), None))
            continue
        these = compare_rows(row, other)
        found += these
        same += not these
    found += [
        Difference(key, "added", None, _what(row))
        for key, row in rows_b.items()
        if key not in rows_a
    ]
    return RunDiff(a, b, found, same)


def _what(row: RowInfo) -> str:
    """A row in a few words: its function (a step), else its kind."""
    return row.fn if row.kind == "step" and row.fn else row.kind


def _same_step_function(a: str | None, b: str | None) -> bool:
    """Whether ``a`` and ``b`` name one library step, one the name a file written before held."""
    return a is not None and b is not None and (same_function(a, b) or same_function(b, a))


def compare_rows(a: RowInfo, b: RowInfo) -> list[Difference]:
    """How the row ``b`` differs from the row ``a`` of the same key; empty: it does not."""
    key = a.key
    if a.kind != b.kind:
        return [Difference(key, "kind", a.kind, b.kind)]
    found = []
    # A library step's name files written before hold is the same function (step_names.py).
    if a.fn != b.fn and not _same_step_function(a.fn, b.fn):
        found.append(Difference(key, "function", a.fn, b.fn))
    if not _same_arguments(a.args_fp, b.args_fp):
        found.append(
            Difference(
                key,
                "arguments",
                a.args_fp,
                b.args_fp,
                differences(a.args_fp or "", b.args_fp or ""),
            )
        )
    if a.status != b.status:
        found.append(Difference(key, "status", a.status, b.status, b.error or a.error or ""))
    if a.result != b.result:
        found.append(Difference(key, "result", a.result, b.result, value_diff(a.result, b.result)))
    return found


def _same_arguments(a: str | None, b: str | None) -> bool:
    if a == b:
        return True
    parts_a, parts_b = (a or "").split(), (b or "").split()
    return len(parts_a) == len(parts_b) and all(
        same_digest(x.rpartition("=")[2], y.rpartition("=")[2])
        and x.rpartition("=")[0] == y.rpartition("=")[0]
        for x, y in zip(parts_a, parts_b, strict=True)
    )


def value_diff(a: str | None, b: str | None) -> str:
    """Two stored results' difference in a line: the paths whose values differ, ``a -> b``."""
    va, _ = decode_result(a)
    vb, _ = decode_result(b)
    paths: list[str] = []
    _walk("$", va, vb, paths)
    if not paths:  # the same value stored as other text (a tag's spelling)
        return "the same value, stored differently"
    more = len(paths) - MAX_PATHS
    shown = "; ".join(paths[:MAX_PATHS])
    return shown + (f"; and {more} more" if more > 0 else "")


def _walk(path: str, a: Any, b: Any, out: list[str]) -> None:
    if len(out) >= MAX_WALKED:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            where = f"{path}.{k}" if isinstance(k, str) and k.isidentifier() else f"{path}[{k!r}]"
            if k not in b:
                out.append(f"{where}: removed ({_short(a[k])})")
            elif a[k] != b[k]:
                _walk(where, a[k], b[k], out)
        for k in b:
            if k not in a:
                where = (
                    f"{path}.{k}" if isinstance(k, str) and k.isidentifier() else f"{path}[{k!r}]"
                )
                out.append(f"{where}: added ({_short(b[k])})")
        return
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                _walk(f"{path}[{i}]", x, y, out)
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items -> {len(b)}")
        return
    if a != b:
        out.append(f"{path}: {_short(a)} -> {_short(b)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"
