"""Row checksums: damage to a recorded step is detected, never replayed as a wrong value.

SQLite keeps no checksum of a row's content: a flipped byte in a journal file
can leave a file that opens and returns another value. Each step row carries
``step_sum`` of what a replay depends on (its run, key, kind, status,
function, argument fingerprint, result and error), written in the same
statement as the row and checked when the row is replayed (replay.py) or
shown (``lil show``). A CRC-32: it detects damage (any burst of up to 32
flipped bits, and all but one in 2**32 of anything else); it is not a seal
against someone who edits the file on purpose and recomputes it.

Rows written before the checksum existed (migration 0012) hold NULL and are
read as before, unchecked.
"""

from __future__ import annotations

from zlib import crc32

from ..errors import DamagedRowError

#: The function names a sleep's and a wait's rows hold (sleeps.SLEEP_FN, waits.WAIT_FN),
#: then the ones files written before hold (step_names.HISTORY): their checksum is
#: ``pause_sum``, not ``step_sum``.
PAUSE_FNS = ("letitloop:sleep", "letitloop:wait_for", "letitloop.sleep", "letitloop.wait_for")

__all__ = [
    "PAUSE_FNS",
    "damaged_marker",
    "done_sum",
    "marker_sum",
    "pause_sum",
    "row_damaged",
    "step_sum",
]


def step_sum(
    run_id: str,
    key: str,
    status: str,
    fn: str | None,
    fp: str | None,
    result: str | None,
    error: str | None,
) -> int:
    """The checksum of a step row (kind ``step``) with these fields, as stored in its ``checksum``.

    ``run_id`` is the run's id (not a store's run key), ``fn`` the function's
    qualified name (not its id in ``functions``), so every store and every
    reader computes the same number from what it shows. Fields are joined by
    the unit separator (``\\x1f``, which no JSON result, fingerprint or key
    holds unescaped); a missing value is written as ``None``, which no JSON
    text is. Text with lone surrogates (an error message) is hashed as is.
    """
    text = f"{run_id}\x1f{key}\x1fstep\x1f{status}\x1f{fn}\x1f{fp}\x1f{result}\x1f{error}"
    try:
        return crc32(text.encode())  # the fast path: no error handler to look up
    except UnicodeEncodeError:
        return crc32(text.encode("utf-8", "surrogatepass"))


def done_sum(run_id: str, key: str, fn: str | None, fp: str | None, result: str | None) -> int:
    """``step_sum(run_id, key, "done", fn, fp, result, None)``: the checksum of a step that
    returned, for a fresh step's row and its replay's check (its status and error written
    out: 40% less than step_sum). tests/test_checksums.py holds the two to one number."""
    text = f"{run_id}\x1f{key}\x1fstep\x1fdone\x1f{fn}\x1f{fp}\x1f{result}\x1fNone"
    try:
        return crc32(text.encode())
    except UnicodeEncodeError:
        return crc32(text.encode("utf-8", "surrogatepass"))


def row_damaged(
    run_id: str,
    key: str,
    kind: str,
    status: str,
    fn: str | None,
    fp: str | None,
    result: str | None,
    error: str | None,
    checksum: int | None,
) -> bool:
    """Whether a row as a reader sees it (run id, function name) fails its checksum.

    False for a row without one: written before checksums (or, for a sleep or
    a wait, before 2026-12), a step running or retrying, a sleep sleeping, a wait
    waiting. A marker's ``run_id`` is its run's.
    """
    if checksum is None:
        return False
    if kind == "marker":
        return checksum != marker_sum(run_id, key, status)
    if kind in ("sleep", "wait"):
        return status == "done" and checksum != pause_sum(run_id, key, kind, result, error)
    if kind != "step" or status not in ("done", "failed"):
        return False
    return checksum != step_sum(run_id, key, status, fn, fp, result, error)


def marker_sum(run: str, key: str, status: str) -> int:
    """The checksum of a marker's row: its run (the run id, ``*`` for a goal-scoped
    marker, empty for a global one), its name and its status, which decides whether
    its block runs again."""
    return crc32(f"{run}\x1f{key}\x1fmarker\x1f{status}".encode("utf-8", "surrogatepass"))


def pause_sum(run_id: str, key: str, kind: str, result: str | None, error: str | None) -> int:
    """The checksum of a ``done`` sleep's or wait's row: its run id, key, kind, the value a
    wait was sent (``result``) and its timeout (``error``); a sleep has neither. Written by
    the statement that ends the pause (or that sends the wait its value), checked when it
    replays."""
    text = f"{run_id}\x1f{key}\x1f{kind}\x1fdone\x1f{result}\x1f{error}"
    return crc32(text.encode("utf-8", "surrogatepass"))


def damaged_marker(name: str, run: str, goal: str, scope: str) -> DamagedRowError:
    """The error of a marker's row failing its checksum (its block is not run again)."""
    return DamagedRowError(
        f"marker {name!r} (run {run or '-'} of goal {goal!r}, scope {scope}): its recorded "
        f"row fails its checksum, so the journal file was damaged or edited outside "
        f"letitloop, and whether its block already ran cannot be told; restore the file "
        f"from a backup, or reset the marker's run once you know",
        run_id=run,
        key=name,
    )
