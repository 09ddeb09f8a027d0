"""What another process does to a run: send a value to its wait, or cancel it.

The library under ``lil send`` and ``lil cancel``, and behind
``letitloop.send`` and ``letitloop.cancel``. Both write to the journal the
run lives in, through its :class:`~letitloop.inspection.Inspector` (no SQL
here), each in one transaction, and never need the process that holds the
run: it reads what they wrote (``letitloop/primitives/waits.py``,
``letitloop/run/cancellation.py``).

- A value sent is written into the row of the wait it answers, which
  becomes ``done`` with the value as its result: accepted only while the run
  waits for that name, once (a second value, or a value for a name the run
  is not waiting for, raises NotWaitingError saying why).
- A cancel of a run no process holds marks it ``cancelled`` at once; for a
  run a live process holds, it records the request, and the holder stops at
  its next step, marker or wait (RunCancelledError), and marks it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import codec
from ..errors import LetItLoopError, NotWaitingError, RunHeldError, RunNotFoundError
from ..identity.ids import HOST
from ..identity.keys import split_key
from ..inspection import (
    Inspector,
    RunInfo,
    WaitAnswer,
    WaitRow,
    as_inspector,
    find_run,
    get_run,
    open_inspector,
    parse_utc,
)
from ..inspection.inspector_changes import RunControl
from ..inspection.inspector_detail import RunHistory
from ..integrity.encryption import Cipher, env_cipher, key_refusal, make_cipher
from ..maintenance.entries import cancel_waiting
from ..maintenance.holding import holding_run
from ..primitives.clock import utc_iso
from ..runtext.previews import preview
from ..stores.sqlite.store import Store

# -- send ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    """What :func:`send_text` did: the run (as it was) and the key of the wait it answered."""

    run: RunInfo
    key: str
    live: bool
    """True when a live process held the run as the value was sent: it wakes within about a
    tenth of a second. False: the run waits for no process; running its program again
    resumes it."""


def _waiting_run(journal: Inspector, ref: str, name: str) -> RunInfo:
    """The run ``ref`` names; for a goal, its newest run waiting for ``name`` if it has one."""
    if journal.has_goal(ref) and not journal.has_run(ref):
        for run_id, key in journal.waits_in_progress(ref):
            if key == name or split_key(key)[0] == name:
                return get_run(journal, run_id)
    return find_run(journal, ref)


def _quoted(keys: list[str]) -> str:
    return ", ".join(repr(k) for k in keys)


def send_text(
    inspector: Inspector | Store,
    ref: str,
    name: str,
    text: str,
    *,
    clock: Callable[[], float] = time.time,
    encryption_key: str | bytes | None = None,
) -> Sent:
    """Answer run ``ref``'s wait for ``name`` with ``text`` (the value as codec JSON text).

    ``ref`` is a run id, a unique id prefix, a run name, or a goal (its newest
    run waiting for ``name``). ``name`` is the name given to ``wait_for`` (its
    current wait) or an exact key (``approval#2``). Raises RunNotFoundError
    for an unknown run, NotWaitingError when the run is not waiting for that
    name (already answered, timed out, finished, or waiting for something
    else); nothing is written then. A wait whose deadline (``timeout=``) has
    passed takes no value, even while its row still says ``waiting`` (its
    process stopped, or has not looked yet): the deadline is read and
    compared in the same write transaction as the value would be written,
    so a send and the waiter's timeout never both win.

    Into a run whose goal's values are encrypted (letitloop/integrity/encryption.py) the
    value is written encrypted, bound to the run and the wait's key, with
    ``encryption_key`` (None: ``LETITLOOP_ENCRYPTION_KEY``); without that key,
    or with another one, EncryptionKeyError, and nothing is written.
    """
    journal = as_inspector(inspector)
    run = _waiting_run(journal, ref, name)
    where = f"run {run.id} of goal {run.goal!r}"
    cipher = _sending_cipher(journal, run, where, encryption_key)
    expected = _expectations(journal, run, cipher)

    def choose(rows: list[WaitRow]) -> WaitAnswer:
        named = [r for r in rows if r.key == name or split_key(r.key)[0] == name]
        waiting = [r for r in named if r.status == "waiting"]
        if len(waiting) > 1:
            raise NotWaitingError(
                f"{where} waits for several keys named {preview(name)} "
                f"({_quoted([r.key for r in waiting])}); send to one of them by its key",
                run_id=run.id,
                key=name,
            )
        if run.state in ("completed", "cancelled") and (waiting or not named):
            raise NotWaitingError(
                f"{where} is {run.state}: it waits for nothing, so no value can be sent to it "
                f"(lil runs {run.goal} lists the goal's runs)",
                run_id=run.id,
                key=name,
            )
        if not waiting:
            raise NotWaitingError(_not_waiting(where, name, named, rows), run_id=run.id, key=name)
        key, began, deadline = waiting[0].key, waiting[0].started_at, waiting[0].deadline
        _check_value(where, run.id, key, text, expected)
        now = clock()
        if deadline is not None and now >= _seconds(deadline, now + 1.0):
            raise NotWaitingError(
                f"{where} is not waiting for {preview(name)}: its wait {key!r} timed out at "
                f"{deadline} (no value was sent by then); a wait takes no value after its "
                f"timeout, and the run gets WaitTimeoutError there",
                run_id=run.id,
                key=name,
            )
        try:
            took: float | None = (now - parse_utc(str(began)).timestamp()) * 1000.0
        except (TypeError, ValueError, OverflowError):
            took = None
        if cipher is not None:  # bound to the run and the wait's key, as a step's result
            return WaitAnswer(key, cipher.seal(text, run.id, key, "result"), utc_iso(now), took)
        return WaitAnswer(key, text, utc_iso(now), took)

    # Looked at before the answer too: a waiter woken at once (a thread of this process)
    # may take the value and end its run before a look after it.
    held = journal.is_held(run.id)
    try:
        answered = journal.answer_wait(run, choose)
    except _Unread:  # the wait started after its expectation was read: read it again
        expected.update(_expectations(journal, run, cipher))
        answered = journal.answer_wait(run, choose)
    return Sent(run, answered.key, held or journal.is_held(run.id))


class _Unread(Exception):
    """The wait chosen has no expectation read: it may have started since they were read."""


#: The expectation of a wait with none recorded (a wait_for without expect=).
_ANY: dict[str, Any] = {}


def _expectations(
    journal: RunHistory, run: RunInfo, cipher: Cipher | None
) -> dict[str, dict[str, Any]]:
    """What each wait of ``run`` takes, by the wait's key (letitloop/primitives/expects.py): the
    recorded ``expects:`` rows, and each wait row present now (``_ANY`` when it has none)."""
    from ..integrity.encryption import encrypted
    from ..primitives.expects import PREFIX, step_key

    found: dict[str, dict[str, Any]] = {}
    waits = []
    for row in journal.rows(run):
        if row.kind == "wait":
            waits.append(row.key)
        elif row.key.startswith(PREFIX) and row.status == "done" and row.result is not None:
            text = row.result
            if encrypted(text):
                if cipher is None:
                    continue  # the value is checked by the run itself
                text = cipher.open(text, run.id, row.key, "result")
            recorded = codec.decode(text)
            if isinstance(recorded, dict):
                found[row.key] = recorded
    return {key: found.get(step_key(key), _ANY) for key in waits}


def _check_value(
    where: str, run_id: str, key: str, text: str, expected: dict[str, dict[str, Any]]
) -> None:
    """NotWaitingError when the wait ``key`` does not take ``value``; nothing is written."""
    from shlex import quote

    from ..primitives.expects import example_text, problem

    recorded = expected.get(key)
    if recorded is None:
        raise _Unread
    schema = recorded.get("schema")
    if not isinstance(schema, dict):
        return
    wrong = problem(schema, codec.decode(text))
    if wrong is None:
        return
    raise NotWaitingError(
        f"{where} does not take this value for {key!r} ({recorded.get('about')}): {wrong}; "
        f"nothing was written, the run still waits; send e.g. "
        f"{quote(example_text(recorded))}",
        run_id=run_id,
        key=key,
    )


def _sending_cipher(
    journal: RunControl, run: RunInfo, where: str, encryption_key: str | bytes | None
) -> Cipher | None:
    """The cipher a value sent to ``run`` is encrypted with: the key given (or
    ``LETITLOOP_ENCRYPTION_KEY``) when the run's goal is encrypted; None (the value stored as
    sent) when it is not. EncryptionKeyError for an encrypted goal and no key, or another.
    """
    cipher = env_cipher() if encryption_key is None else make_cipher(encryption_key)
    stored = journal.key_check(run)
    refused = key_refusal(where, stored, cipher, doing="this send")
    if refused is not None:
        raise refused
    return None if stored is None else cipher


def _seconds(iso: str, otherwise: float) -> float:
    """A recorded time in seconds since the epoch; ``otherwise`` when it is not one."""
    try:
        return parse_utc(str(iso)).timestamp()
    except (TypeError, ValueError, OverflowError):
        return otherwise


def _not_waiting(where: str, name: str, named: list[WaitRow], rows: list[WaitRow]) -> str:
    """Why a value for ``name`` cannot be taken, in words."""
    if named:
        key, error, finished = named[-1].key, named[-1].error, named[-1].finished_at
        if error:
            return (
                f"{where} is not waiting for {preview(name)}: its wait {key!r} timed out at "
                f"{finished} ({error}); a wait takes no value after its timeout"
            )
        return (
            f"{where} already received a value for {preview(name)} (wait {key!r}, at "
            f"{finished}); a wait takes one value, and the run replays it. A later "
            f"wait_for({preview(name)}) in the run takes the next value once it waits"
        )
    others = [r.key for r in rows if r.status == "waiting"]
    now = f"it waits for {_quoted(others)}" if others else "it is not waiting for anything now"
    return (
        f"{where} is not waiting for {preview(name)}: {now}. A value is taken only while the run "
        f"waits for its name: send it once 'lil runs' shows the run waiting for {preview(name)}"
    )


def send(
    run: str,
    name: str,
    value: Any,
    *,
    path: str | os.PathLike[str] | None = None,
    registry: codec.CodecRegistry | None = None,
    encryption_key: str | bytes | None = None,
) -> Sent:
    """Send ``value`` to the wait ``name`` of ``run`` (a run id, prefix, name, or goal).

    The value is encoded by the codec (``registry``, or the default one), so a
    typed value comes back to ``wait_for`` with its type; it is written into
    the wait's row at once, and the waiting process, if any, wakes within
    about a tenth of a second. ``path`` is the journal file (default: as for
    ``Journal``). Into an encrypted goal the value is stored encrypted with
    ``encryption_key`` (None: ``LETITLOOP_ENCRYPTION_KEY``). Raises what
    :func:`send_text` raises, and EncodeError for a value the codec cannot
    encode (nothing written).
    """
    text = codec.encode(value, registry)
    journal = open_inspector(_location(path), write=True)
    try:
        return send_text(journal, run, name, text, encryption_key=encryption_key)
    finally:
        journal.close()


def _location(path: str | os.PathLike[str] | None) -> str | Path | None:
    """``path=`` as ``open_inspector`` takes it: a URL stays text (a Path would lose a slash)."""
    return path if path is None or isinstance(path, str) else Path(path)


# -- cancel ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Cancelled:
    """What :func:`cancel_run` did."""

    run: RunInfo
    """The run as it is now."""
    at_once: bool
    """True: no process held it, and it is cancelled now. False: its holder was asked to stop."""
    already: bool = False
    """True when a cancel had been asked for before (nothing new was recorded)."""


def _who(reason: str | None) -> str:
    by = f"lil cancel (pid {os.getpid()} on {HOST})"
    return f"{by}: {reason}" if reason else by


def cancel_run(
    inspector: Inspector | Store,
    ref: str,
    *,
    reason: str | None = None,
    clock: Callable[[], float] = time.time,
) -> Cancelled:
    """Cancel run ``ref`` (a run id, prefix, name, or goal: its newest run).

    A run no process holds is marked ``cancelled`` at once, under its lock
    (so no opener takes it meanwhile). A run a live process holds gets a
    cancel request; its holder raises RunCancelledError at its next step,
    marker or wait, and marks the run ``cancelled`` as it closes. Either way
    no opener resumes the run afterwards (``lil fork`` starts it again from
    a step). Raises RunNotFoundError for an unknown run, LetItLoopError for a
    run that completed or was cancelled already.
    """
    journal = as_inspector(inspector)
    now, why = utc_iso(clock()), _who(reason)
    try:
        run = find_run(journal, ref)
    except RunNotFoundError:  # a queue's entry that waits is cancelled before it starts
        entry = cancel_waiting(journal, ref, now, f"RunCancelledError: cancelled by {why}")
        if entry is None:
            raise
        return Cancelled(entry, at_once=True)
    where = f"run {run.id} of goal {run.goal!r}"
    if run.state == "completed":
        raise LetItLoopError(
            f"{where} completed at {run.finished_at}: there is nothing left to cancel"
        )
    if run.status == "cancelled":
        raise LetItLoopError(f"{where} was cancelled already, at {run.finished_at}")
    try:
        with holding_run(journal, run, "cancel"):
            journal.cancel_now(run.id, now, why, f"RunCancelledError: cancelled by {why}")
        return Cancelled(get_run(journal, run.id), at_once=True)
    except RunHeldError:
        pass
    already = run.cancel_requested_at is not None
    journal.request_cancel(run.id, now, why)
    return Cancelled(get_run(journal, run.id), at_once=False, already=already)


def wait_until_stopped(
    inspector: Inspector | Store, run_id: str, timeout: float, *, interval: float = 0.05
) -> RunInfo:
    """The run once its holder has let go (cancelled, or finished first), or after ``timeout``."""
    journal = as_inspector(inspector)
    deadline = time.monotonic() + timeout
    while True:
        info = get_run(journal, run_id)
        if info.state != "running" or time.monotonic() >= deadline:
            return info
        time.sleep(interval)


def cancel(
    run: str,
    *,
    reason: str | None = None,
    path: str | os.PathLike[str] | None = None,
    wait: float | None = None,
) -> Cancelled:
    """Cancel ``run`` (see :func:`cancel_run`); with ``wait``, wait up to that many seconds.

    ``wait`` waits for a live holder to stop; the returned ``run`` then says
    how it ended (``cancelled``, or ``completed`` if it finished first).
    ``path`` is the journal file (default: as for ``Journal``).
    """
    journal = open_inspector(_location(path), write=True)
    try:
        done = cancel_run(journal, run, reason=reason)
        if wait is not None and not done.at_once:
            info = wait_until_stopped(journal, done.run.id, wait)
            done = Cancelled(info, at_once=False, already=done.already)
        return done
    finally:
        journal.close()
