"""Waiting for outside input: ``value = j.wait_for(name)``, answered by ``lil send``.

A wait is a row of the goal's journal table, keyed and numbered like a step
(``approval``, ``approval#2``), with kind ``wait``. It is written
``waiting`` when the wait starts (``wake_at`` holds its deadline when it has
a ``timeout``). A value sent to it (``lil send``, ``letitloop.send``: see
``control.py``) is written into that very row, which becomes ``done`` with
the value as its ``result``: the value is journaled like a step's result,
and every later attempt replays it. The waiting process notices within
about :data:`letitloop.primitives.timers.POLL_SECONDS` (it naps and looks at the file's
``data_version``; it does not spin).

A wait whose ``timeout`` passes becomes ``done`` with its ``error``
(``WaitTimeoutError``), decided under the write lock against a value sent
at the same moment; a replay raises the same error at once.

``stop_after=`` lets the process stop waiting after that many seconds:
:class:`RunWaiting` (a ``SystemExit`` with status :data:`WAIT_EXIT_STATUS`)
leaves the run with status ``waiting`` and ends the process; running the
program again after a value was sent resumes the run, which replays the value.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from .. import codec
from ..errors import DecodeError, EncryptionKeyError, WaitTimeoutError
from ..identity.step_names import WAIT, named
from ..integrity.encryption import encrypted
from . import timers
from .clock import utc_iso
from .sleeps import PauseKey, check_pause, started, traced

if TYPE_CHECKING:
    from ..stores.storage_pauses import PauseRows, PauseStore
    from .expects import Expect
    from .runs import PausedRun

#: The ``fn`` of a wait's row.
WAIT_FN = WAIT

#: The exit status of a process that stopped to wait (EX_TEMPFAIL of sysexits.h:
#: "a temporary failure; the user is invited to retry"). ``lil watch`` does
#: not restart it: it reads the run's status, not this number (see supervisor.py).
WAIT_EXIT_STATUS = 75


class RunWaiting(SystemExit):
    """The run stopped to wait for outside input: status ``waiting``; the process exits 75.

    A ``SystemExit``, so that it passes through ``except Exception`` in the
    program and ends it quietly; ``lil watch`` does not restart it. Run the
    program again once a value was sent (``lil send``): the run resumes.
    """

    def __init__(self, message: str, run_id: str, key: str) -> None:
        super().__init__(WAIT_EXIT_STATUS)
        self.message = message
        self.run_id = run_id
        self.key = key

    def __str__(self) -> str:
        return self.message


def _ending(j: PausedRun, storage: PauseRows, key: str) -> tuple[str | None, str | None] | None:
    """``(result, error)`` of the wait's row once it is done; None while it waits."""
    row = storage.wait_ending(j.run_id, key)
    if row and row[0] == "done":
        return row[1], row[2]
    return None


def _value(j: PausedRun, key: str, ending: tuple[str | None, str | None]) -> Any:
    """The value a done wait holds; WaitTimeoutError for one that timed out."""
    result, error = ending
    if error is not None:
        raise WaitTimeoutError(
            f"wait {key!r} (run {j.run_id} of goal {j.goal!r}): {error}; the timeout is "
            f"recorded, so every attempt of this run gets it here",
            run_id=j.run_id,
            key=key,
        )
    if result is None:
        return None
    if encrypted(result):  # sent encrypted (lil send with the key: control.py)
        if j._cipher is None:
            raise EncryptionKeyError(
                f"wait {key!r} (run {j.run_id} of goal {j.goal!r}): the value sent is "
                f"encrypted and this journal has no key: expected the key it was sent with, "
                f"as encryption_key= or LETITLOOP_ENCRYPTION_KEY",
                run_id=j.run_id,
                key=key,
            )
        result = j._cipher.open(result, j.run_id, key, "result")
    try:
        return codec.decode(result, j.registry)
    except DecodeError as exc:
        raise DecodeError(f"wait {key!r} (run {j.run_id}): the value sent: {exc}") from None


def _received(
    j: PausedRun, storage: PauseStore, key: str, ending: tuple[str | None, str | None]
) -> tuple[str | None, str | None]:
    """A value sent while this holder waited (``ending``), sealed as received before it is
    handed on (``lil send`` holds no key), so that a later edit of it is refused on replay
    instead of sealed at the next attempt's open (sqlite_seals.adopt, chains.adopted);
    what is handed on is the row as sealed, checked. Without the key: ``ending``."""
    sealed = j._opened.sealed
    if sealed is None or j.replay_only:
        return ending
    from ..integrity.sealcheck import check_stored, read_sealed

    storage.seal_run(j.run_id, sealed.secret)
    stored = read_sealed(j, key)
    check_stored(j, key, "wait", stored)
    assert stored is not None
    return stored[5], stored[6]


def _time_out(j: PausedRun, storage: PauseStore, key: str, began: float, deadline: float) -> Any:
    """The deadline passed: record the timeout, unless a value won the race; raise or return it."""
    now = j.clock()
    error = (
        f"WaitTimeoutError: no value was sent for {key!r} by {utc_iso(deadline)} "
        f"(waiting since {utc_iso(began)})"
    )
    storage.time_out_wait(j.run_id, key, error, utc_iso(now), (now - began) * 1000.0)
    ending = _ending(j, storage, key)
    if ending is not None and ending[1] is None:  # a value sent at the same moment won
        ending = _received(j, storage, key, ending)
    return _value(j, key, ending if ending is not None else (None, error))


def _stop(j: PausedRun, key: str, expected: dict[str, Any] | None) -> RunWaiting:
    from shlex import quote

    if expected is None:
        what, value = repr(key), "VALUE"
    else:
        from .expects import example_text

        what, value = f"{key!r} ({expected.get('about')})", quote(example_text(expected))
    line = (
        f"letitloop: run {j.run_id} of goal {j.goal!r} stopped to wait for {what}; send it "
        f"with: lil send {j.run_id} {quote(key)} {value}, then run the program again to resume"
    )
    print(line, file=sys.stderr)
    return RunWaiting(line, j.run_id, key)


@named("letitloop:wait_for.expects")
def _expectation(record: dict[str, Any]) -> dict[str, Any]:
    """The step's function of an ``expects:<name>`` row: the expectation, as given."""
    return record


def _recorded_expect(j: PausedRun, name: str, expect: Expect | None) -> dict[str, Any] | None:
    if expect is None:
        return None
    from .expects import PREFIX

    recorded: dict[str, Any] = j.step(PREFIX + name, _expectation, expect.record())
    return recorded


async def _async_recorded_expect(
    j: PausedRun, name: str, expect: Expect | None
) -> dict[str, Any] | None:
    if expect is None:
        return None
    from .expects import PREFIX

    recorded: dict[str, Any] = await j.async_step(PREFIX + name, _expectation, expect.record())
    return recorded


def _replayed(j: PausedRun, c: PauseKey) -> Any:
    """What a wait recorded as done gives back: its value, or its recorded timeout."""
    assert c.replay is not None
    if j._opened.sealed is not None:  # the key is set: the value must be what the seal covers
        from ..integrity.sealcheck import check_stored, read_sealed

        stored = read_sealed(j, c.key)
        if stored is not None:
            check_pause(j, c.replay, "wait", stored[5], stored[6])
        check_stored(j, c.key, "wait", stored)
        assert stored is not None
        return _value(j, c.key, (stored[5], stored[6]))
    row = c.storage.recorded_wait(c.replay.rowid)
    if row:
        check_pause(j, c.replay, "wait", row[0], row[1])
    return _value(j, c.key, row if row else (None, None))


def _bounds(j: PausedRun, timeout: float | None, stop_after: float | None) -> tuple[Any, Any]:
    deadline = None if timeout is None else j.clock() + timeout
    hold = None if stop_after is None else time.monotonic() + stop_after
    return deadline, hold


def wait_for(
    j: PausedRun,
    name: str,
    timeout: float | None,
    stop_after: float | None,
    expect: Expect | None = None,
) -> Any:
    """``Journal.wait_for``: the value sent for ``name``, recorded once and replayed ever after.

    ``expect``: what the wait takes (letitloop/primitives/expects.py), recorded first as the
    step ``expects:<name>``, so that a value it does not take is refused when sent.
    """
    timeout = timers.check_seconds(f"wait_for {name!r}: timeout", timeout)
    stop_after = timers.check_seconds(f"wait_for {name!r}: stop_after", stop_after)
    expected = _recorded_expect(j, name, expect)
    c = PauseKey(j, name, WAIT_FN)
    if c.replay is not None:
        return _replayed(j, c)
    try:
        with traced(j, "wait", name, c.key):
            deadline, hold = _bounds(j, timeout, stop_after)
            began, deadline = started(j, c.storage, c.key, "wait", "waiting", deadline)
            got = timers.pause(
                j, c.store, deadline, probe=lambda: _ending(j, c.storage, c.key), hold=hold
            )
            if got == timers.DEADLINE and deadline is not None:
                return _time_out(j, c.storage, c.key, began, deadline)
            if got == timers.HOLD:
                raise _stop(j, c.key, expected)
            return _value(j, c.key, _received(j, c.storage, c.key, got))
    finally:
        c.release(j)


async def async_wait_for(
    j: PausedRun,
    name: str,
    timeout: float | None,
    stop_after: float | None,
    expect: Expect | None = None,
) -> Any:
    """``Journal.async_wait_for``: :func:`wait_for` that lets the event loop run meanwhile."""
    import asyncio

    timeout = timers.check_seconds(f"wait_for {name!r}: timeout", timeout)
    stop_after = timers.check_seconds(f"wait_for {name!r}: stop_after", stop_after)
    expected = await _async_recorded_expect(j, name, expect)
    c = PauseKey(j, name, WAIT_FN)
    if c.replay is not None:
        return _replayed(j, c)
    try:
        with traced(j, "wait", name, c.key):
            deadline, hold = _bounds(j, timeout, stop_after)
            began, deadline = await asyncio.to_thread(
                started, j, c.storage, c.key, "wait", "waiting", deadline
            )
            got = await timers.async_pause(
                j, c.store, deadline, probe=lambda: _ending(j, c.storage, c.key), hold=hold
            )
            if got == timers.DEADLINE and deadline is not None:
                return await asyncio.to_thread(_time_out, j, c.storage, c.key, began, deadline)
            if got == timers.HOLD:
                raise _stop(j, c.key, expected)
            got = await asyncio.to_thread(_received, j, c.storage, c.key, got)
            return _value(j, c.key, got)
    finally:
        c.release(j)
