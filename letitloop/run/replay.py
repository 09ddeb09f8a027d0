"""Replay: a recorded step's result handed back, read lazily, and the errors of a call that differs.

``Results`` reads result texts a chunk at a time in journal order; ``replay``
checks the recorded function and decodes; ``mismatch`` explains a call whose
arguments differ from the recorded ones, with the ways out.

This module is the one owner of ``Journal._replayed``, the keys this attempt
replayed that are not yet written to ``step_replays``. Thread rules: any
thread or task that replays a step appends its key (:func:`replay`); any
thread that writes them takes each key once (:func:`flush_replays`: the
next fresh step's, or the closing one's); the opener's thread empties it for
a new attempt (:func:`forget_replays`). No lock: a ``deque``'s ``append`` and
``popleft`` are atomic.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Any

import msgspec

from .. import codec
from ..codec.document import MARKS, TAG
from ..errors import (
    DamagedRowError,
    DecodeError,
    EncryptionKeyError,
    StepMismatchError,
)
from ..identity.fingerprint import differences
from ..identity.keys import NEST, Recorded, split_key
from ..identity.step_names import same_function
from ..integrity.checksums import PAUSE_FNS, done_sum, step_sum
from ..integrity.encryption import encrypted
from ..integrity.sealcheck import check_sealed, ways_out

if TYPE_CHECKING:
    from ..stores.storage_steps import StepRows
    from .journal import Journal

#: Results asked for per query when a run replays: replays mostly come in journal
#: order, so one query serves this many of them; the store reads fewer when their
#: texts pass ``storage.RESULT_BYTES``, so memory holds at most that many bytes of
#: them at once, not this many rows whatever their size.
RESULT_CHUNK = 256

#: Plain JSON text's value (codec.decode reads a document the same way first).
plain = msgspec.json.Decoder().decode

#: A row not in the cache (a result read can be None: a step that returned None).
_NOT_READ: Any = object()


class Results:
    """Reads recorded results when they are replayed, a chunk at a time, in journal order.

    Only keys, fingerprints and rowids of a run's steps stay in memory for
    the attempt; a result's text is read when its step replays and dropped
    once handed back, so memory does not grow with the number of steps.

    The one owner of its rows and cache (``Journal._opened.results``: a new one each
    attempt, made by ``opening.py``). Thread rules: any thread or task that
    replays calls :meth:`get`, with no lock; each takes its own row from the
    dict it found (a chunk read by one thread replaces ``cache`` whole, and
    two threads never replay one row: its key is claimed first), so a race
    costs a read again, never a wrong result.
    :meth:`add` (a retried parent step, in its own thread) replaces
    ``rowids`` whole.
    """

    def __init__(self, storage: StepRows, rowids: list[int]) -> None:
        self.storage = storage
        self.rowids = rowids  # ascending
        self.cache: dict[int, str | None] = {}

    def add(self, rowids: list[int]) -> None:
        """Rows recorded since the attempt began that may now replay (see StepKeys.reopen)."""
        self.rowids = sorted(set(self.rowids).union(rowids))

    def get(self, rowid: int) -> str | None:
        cache = self.cache
        text: str | None = cache.pop(rowid, _NOT_READ)  # one lookup: the usual case, read
        if text is not _NOT_READ:
            return text
        i = bisect_left(self.rowids, rowid)
        chunk = self.rowids[i : i + RESULT_CHUNK]
        if not chunk or chunk[0] != rowid:
            chunk = [rowid]
        self.cache = cache = self.storage.results(chunk)
        if rowid not in cache:
            raise DecodeError(
                f"the recorded row {rowid} of {self.storage.table} is gone: was the run reset "
                f"while this process held it?"
            )
        return cache.pop(rowid)


def reopen_children(j: Journal, storage: StepRows, key: str) -> None:
    """Before step ``key`` is tried again: its children meet the journal as after a crash.

    A child that returned in an earlier try replays (a step that returned is
    never run again for that run), and one that failed keeps its key, as
    they would if the process had been killed between the two tries; the
    parent's function runs again, and so does everything in it outside steps
    (retry.py calls this between two tries, with the storage its step was handed).
    """
    prefix = key + NEST
    rows = storage.recorded_under(j.run_id, prefix)
    j._opened.keys.reopen(prefix, [Recorded(*r) for r in rows])
    assert j._opened.results is not None  # set with the store (opening.py)
    j._opened.results.add([r[3] for r in rows])


def replay(j: Journal, key: str, fn_name: str, recorded: Recorded) -> Any:
    """The result recorded for step ``key``, decoded; StepMismatchError for another function
    (a name files written before hold for ``fn_name`` is the same one: step_names.py).

    Raises DamagedRowError, handing nothing back, when the row fails its
    checksum (letitloop/integrity/checksums.py); a row without one (written before
    checksums, or a sleep's or wait's) replays unchecked.
    """
    if recorded.fn != fn_name and not same_function(recorded.fn, fn_name):
        check_intact(j, recorded)  # a damaged function name is damage, not changed code
        raise StepMismatchError(
            f"step {key!r} (run {j.run_id} of goal {j.goal!r}): recorded by "
            f"{recorded.fn}, now called with {fn_name} — the code changed under a "
            f"recorded run; {ways_out(j, key)}",
            run_id=j.run_id,
            key=key,
            recorded=recorded.fn,
            called=fn_name,
        )
    opened = j._opened  # the attempt's results, and its seal's chain (attempt.Attempt)
    results = opened.results
    assert results is not None
    # Results.get() of a row its last read brought (the usual replay), without its call.
    text = results.cache.pop(recorded.rowid, _NOT_READ)
    if text is _NOT_READ:
        text = results.get(recorded.rowid)
    # The checksum is of the name the row holds (an old one: step_names.OLD_NAMES).
    if recorded.sum is not None and recorded.sum != done_sum(
        j.run_id, key, recorded.fn, recorded.fp, text
    ):
        raise damaged(j, key)
    if opened.sealed is not None:  # a seal key is set: the row must be what its seal covers
        check_sealed(j, (key, "step", "done", fn_name, recorded.fp, text, None, None))
    if text is None:
        j._replayed.append(key)
        return None
    if j._cipher is not None:
        text = j._cipher.open(text, j.run_id, key, "result")
    try:
        # codec.decode()'s first case, without its call: plain JSON (no tag at its top,
        # no mark at its end; a scalar is taken only without a mark too, which costs
        # nothing but the call). tests/test_replay_reads.py holds both to one answer.
        value = plain(text)
    except (msgspec.DecodeError, RecursionError):
        pass  # not JSON, or nested deep: codec.decode() tells which
    else:
        t = type(value)
        if (
            (t is dict and (len(value) != 1 or not next(iter(value)).startswith(TAG)))
            or (t is not dict and t is not list)
        ) and text[-1] not in MARKS:
            j._replayed.append(key)
            return value
    try:
        value = codec.decode(text, j.registry)
    except DecodeError as exc:
        if encrypted(text):
            raise not_readable(j, key) from None
        raise DecodeError(f"step {key!r} (run {j.run_id}): {exc}") from None
    j._replayed.append(key)
    return value


def not_readable(j: Journal, key: str) -> EncryptionKeyError:
    """The error of an encrypted result replayed by a journal without the key."""
    return EncryptionKeyError(
        f"step {key!r} (run {j.run_id} of goal {j.goal!r}): its recorded result is "
        f"encrypted and this journal has no key: expected the key it was written with, "
        f"as encryption_key= or LETITLOOP_ENCRYPTION_KEY",
        run_id=j.run_id,
        key=key,
    )


def check_intact(j: Journal, recorded: Recorded) -> None:
    """Raise DamagedRowError if ``recorded``'s row fails its checksum (off the step path:
    before an error that would blame the code for what is damage to the file)."""
    if recorded.sum is None or j._opened.results is None or recorded.fn in PAUSE_FNS:
        return  # a sleep's or wait's row has its own checksum (checksums.pause_sum)
    try:
        text = j._opened.results.get(recorded.rowid)
    except DecodeError:
        return  # the row is gone: the error being raised says enough
    if recorded.sum != step_sum(
        j.run_id, recorded.key, "done", recorded.fn, recorded.fp, text, None
    ):
        raise damaged(j, recorded.key)


def damaged(j: Journal, key: str) -> DamagedRowError:
    """The error of step ``key``'s recorded row failing its checksum."""
    return DamagedRowError(
        f"step {key!r} (run {j.run_id} of goal {j.goal!r}): its recorded row fails its "
        f"checksum, so the journal file was damaged (a disk or copy error) or edited "
        f"outside letitloop, and its result is not handed back; restore the file from a "
        f"backup, or run the step again: {ways_out(j, key)}",
        run_id=j.run_id,
        key=key,
    )


def flush_replays(j: Journal) -> None:
    """Record the steps this attempt replayed since the last call (``step_replays``).

    Called before the attempt's next fresh step and when it closes, so a
    replay costs a list append and the attempt one write per run of replays.
    What "saved by replay" counts is what was written: an attempt killed
    while it was still only replaying counts none of its replays (never more
    than it got back). Safe from any thread: each key is taken once.
    """
    q, keys = j._replayed, []
    while True:
        try:
            keys.append(q.popleft())
        except IndexError:
            break
    if keys and j._opened.storage is not None:
        j._opened.storage.record_replays(j.run_id, j.attempt, keys)
        if j._trace is not None:  # the attempt span's replay event (otel.py)
            j._trace.note_replays(keys)


def forget_replays(j: Journal) -> None:
    """A new attempt begins: replays of an earlier one not written by now never will be."""
    j._replayed.clear()


def mismatch(
    j: Journal,
    key: str,
    fn_name: str,
    fp: str,
    recorded: Recorded,
    call: tuple[tuple[Any, ...], dict[str, Any]] | None = None,
) -> StepMismatchError:
    """The error of a call whose arguments differ from those recorded at its position.

    ``call``: the call's arguments, shown (cut short) in the error's
    ``arguments`` beside the recorded and the new fingerprints.
    """
    check_intact(j, recorded)  # a damaged fingerprint is damage, not other arguments
    name, _ = split_key(key)
    what = differences(recorded.fp or "", fp)
    code = (
        f" (and it was recorded by {recorded.fn}, now called with {fn_name})"
        if not same_function(recorded.fn, fn_name)
        else ""
    )
    return StepMismatchError(
        f"step {key!r} (run {j.run_id} of goal {j.goal!r}) was recorded for other "
        f"arguments than this call of {name!r} passes: {what}{code}; this attempt has not "
        f"made the recorded call, and a result recorded for other arguments is never "
        f"handed back. If an argument legitimately changes between attempts (a timestamp "
        f"or id made outside any step), pass it as letitloop.unchecked(value) or make it "
        f"inside a step; if calls of {name!r} come from several threads or tasks, give "
        f"each its own name (f'{name}:{{item}}'); otherwise the code or its inputs changed "
        f"under a recorded run: {ways_out(j, key)}",
        run_id=j.run_id,
        key=key,
        recorded=recorded.fn,
        called=fn_name,
        differences=what,
        recorded_fp=recorded.fp,
        called_fp=fp,
        arguments=None if call is None else arguments_text(*call),
    )


#: Characters of one argument's text a StepMismatchError keeps.
ARGUMENT_CHARS = 200


def arguments_text(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, str]:
    """A call's arguments as short texts, by position (``"0"``) or name (``"limit="``).

    Text, not the values: the error pickles and is printed, whatever the
    values are. A value whose ``repr`` raises is named by its type; an
    ``unchecked()`` one is not shown (it is often a secret: an API key).
    """
    from ..identity.unchecked import Unchecked

    def text(value: Any) -> str:
        if isinstance(value, Unchecked):
            return "unchecked(…)"
        try:
            shown = repr(value)
        except Exception:  # a broken __repr__ must not hide the mismatch
            shown = f"<{type(value).__name__}>"
        if len(shown) > ARGUMENT_CHARS:
            shown = shown[: ARGUMENT_CHARS - 1] + "…"
        return shown

    out = {str(i): text(v) for i, v in enumerate(args)}
    out.update({f"{k}=": text(v) for k, v in kwargs.items()})
    return out
