"""Step keys: which recorded call a step call is, decided without SQLite.

A step's key is its name, numbered when the name is called again in the same
run (``fetch``, ``fetch#2``, …), and prefixed by its parent's key when it is
called inside another step (``outer/inner``), so a replayed parent skips its
children as a unit and the numbering outside it never shifts.

A call replays a recorded result only if the call is the same: the same
function and the same arguments (see ``letitloop.identity.fingerprint``). The rule:

1. A call of ``name`` replays the earliest recorded call of ``name`` with the
   same arguments that this attempt has not replayed yet. Identical calls
   are interchangeable, so among them the numbering is call order; different
   calls find their own rows whatever order they come in (threads that ran in
   another order on the last attempt).
2. Otherwise, if a recorded call of ``name`` at or before this call's
   position (the n-th call of ``name`` in this attempt) has not been made
   again, the arguments changed under the recorded run: StepMismatchError.
   A result recorded for other arguments is never handed back.
3. Otherwise the call is new: it runs, under the first number from its
   position on that no recorded or claimed call uses.

Two further rules keep numbering defined: a name in flight in one thread or
task cannot be called in another at the same time (which would be numbered
first is timing), and a name used by one asyncio task belongs to it for as
long as that task's event loop runs (ConcurrentStepError in both cases). Once
that loop has stopped (``asyncio.run`` returned), the name is free again: a
task of a later loop, or a thread, can only come after it.
"""

from __future__ import annotations

import re
import sys
import threading
import weakref
from collections import deque
from typing import Any

import msgspec

from ..errors import ConcurrentStepError, InvalidNameError
from .fingerprint import UNCHECKED, same_digest

REPEAT_SUFFIX = re.compile(r"#(\d+)$")

#: Separates a parent step's key from its children's names: ``outer/inner``.
NEST = "/"

# Before 3.12, asyncio.wait_for runs its awaitable in a task of its own.
WAIT_FOR_HINT = (
    " (on this Python, asyncio.wait_for runs the step in a new task: put the timeout "
    "inside the step's function instead)"
    if sys.version_info < (3, 12)
    else ""
)


def split_key(key: str) -> tuple[str, int]:
    """``("fetch", 2)`` for ``"fetch#2"``; ``("fetch", 1)`` for ``"fetch"``."""
    head, sep, tail = key.rpartition("#")
    if sep and tail.isdecimal():  # the common case, without the regex: same answer
        return head, int(tail)
    m = REPEAT_SUFFIX.search(key)
    if m is None:
        return key, 1
    return key[: m.start()], int(m.group(1))


def make_key(name: str, n: int) -> str:
    return name if n == 1 else f"{name}#{n}"


def same_arguments(recorded: str | None, called: str) -> bool:
    """Whether a recorded fingerprint matches a call's, argument by argument (see ``same_digest``).

    An argument matches only the argument at the same position, or under the
    same keyword: an unchecked one (``~``) matches any value there, never
    an argument passed another way.
    """
    if recorded is None:
        return True  # recorded before fingerprints existed: by position only
    if recorded == called:
        return True
    if UNCHECKED not in recorded and UNCHECKED not in called:
        return False
    a, b = recorded.split(), called.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        xn, _, xd = x.rpartition("=")
        yn, _, yd = y.rpartition("=")
        if xn != yn or not same_digest(xd, yd):
            return False
    return True


class Recorded(msgspec.Struct, gc=False):
    """A step row recorded as done: what a replay needs, without its result text.

    A msgspec Struct, made in C (a resume's 999: 0.7 M instructions, 2.2 M as a slotted
    class), untracked by the garbage collector (text and numbers only). Not a dataclass:
    ``dataclasses`` imports ``inspect``, ~7 ms that ``import letitloop`` need not pay.
    """

    key: str
    fn: str | None
    fp: str | None
    #: The row's rowid: its result is read when it is replayed.
    rowid: int
    #: The row's checksum (checksums.step_sum), checked when it replays; None: unchecked.
    sum: int | None = None

    def __repr__(self) -> str:
        return f"Recorded({self.key!r}, {self.fn!r}, {self.fp!r}, {self.rowid})"


def _loop_runs(loop_ref: weakref.ref[Any]) -> bool:
    """Whether the event loop ``loop_ref`` names still runs (its tasks can still step).

    A loop that was garbage-collected or no longer runs (``asyncio.run`` returned) runs
    no task: whatever calls a step of the same name now, in another loop or a thread,
    comes after every one of its steps. Two tasks of one loop stay apart even across two
    ``run_until_complete`` calls: nothing tells them apart from sibling tasks.
    """
    loop = loop_ref()
    return loop is not None and loop.is_running()


class _Name:
    """The recorded calls of one name, and which of them this attempt has replayed."""

    __slots__ = ("by_fp", "fuzzy", "low", "numbers")

    def __init__(self) -> None:
        #: Recorded numbers, ascending.
        self.numbers: list[int] = []
        #: Index into ``numbers`` below which every number has been claimed.
        self.low = 0
        #: Unclaimed recorded numbers by fingerprint, ascending.
        self.by_fp: dict[str | None, deque[int]] = {}
        #: Whether a recorded fingerprint is legacy (None) or holds an unchecked part.
        self.fuzzy = False


class StepKeys:
    """The key allocator of one open run: thread-safe, no I/O.

    The one owner of the attempt's keys (``Journal._opened.keys``: a new one each attempt, made
    by ``opening.py``). Thread rules: any thread or task of the journal calls its
    methods; each takes ``lock``, and the state they share (``recorded``, ``claimed``,
    names, calls, owners, ``marker_keys``) is read and written under it, but for
    :meth:`release`, which removes its owner from the calls in flight without it (its
    docstring says why that is safe). ``load`` runs before the attempt is open.
    """

    #: Whether :meth:`claim` decides the usual calls (a new name; a replay of a recorded
    #: call with the same arguments; by a thread or an asyncio task) without the general
    #: rules; tests/test_step_keys.py holds both ways to the same answers.
    fast = True

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.lock = threading.Lock()
        #: Done rows loaded at open, by key.
        self.recorded: dict[str, Recorded] = {}
        self._names: dict[str, _Name] = {}
        #: Keys taken in this attempt: replayed, or run (done or failed).
        self.claimed: set[str] = set()
        #: Calls per name in this attempt: the position of the next one.
        self._calls: dict[str, int] = {}
        self._in_flight: dict[str, list[object]] = {}
        #: The asyncio task that first used each name, and that task's event loop.
        self._task_names: dict[str, tuple[weakref.ref[Any], weakref.ref[Any]]] = {}
        #: Keys of this run's run-scoped markers: no step may take one.
        self.marker_keys: set[str] = set()

    def load(self, rows: list[Recorded]) -> None:
        """Add the run's done rows (in journal order)."""
        recorded, names = self.recorded, self._names
        for r in rows:
            key, fp = r.key, r.fp
            recorded[key] = r
            name, n = split_key(key)
            state = names.get(name)
            if state is None:
                state = names[name] = _Name()
            state.numbers.append(n)
            q = state.by_fp.get(fp)
            if q is None:
                q = state.by_fp[fp] = deque()
            q.append(n)
            if fp is None or UNCHECKED in fp:
                state.fuzzy = True
        for state in self._names.values():
            if len(state.numbers) > 1 and state.numbers != sorted(state.numbers):
                state.numbers.sort()
                for q in state.by_fp.values():
                    q_sorted = sorted(q)
                    q.clear()
                    q.extend(q_sorted)

    def reopen(self, prefix: str, rows: list[Recorded]) -> None:
        """Meet the keys under ``prefix`` afresh, as a new attempt would: forget this
        attempt's calls of them and take ``rows`` (their done rows now) as recorded.

        For a parent step tried again (``prefix`` is ``parent/``): its children
        that returned in an earlier try replay, and those that failed keep their
        keys, exactly as after a crash between the tries.
        """
        with self.lock:
            self.claimed = {k for k in self.claimed if not k.startswith(prefix)}
            for table in (self.recorded, self._names, self._calls, self._task_names):
                for name in [n for n in table if n.startswith(prefix)]:
                    del table[name]
            self.load(rows)

    def recorded_unclaimed(self, prefix: str) -> bool:
        """Whether a done row keyed under ``prefix`` was recorded and not yet met this attempt.

        ``patched()`` asks it: such a row means the run went past this point
        under earlier code (letitloop/primitives/patches.py).
        """
        with self.lock:
            claimed = self.claimed
            return any(k.startswith(prefix) and k not in claimed for k in self.recorded)

    def used(self, key: str) -> bool:
        """Whether a step of this run has ``key`` (recorded, or called in this attempt)."""
        return key in self.recorded or key in self.claimed

    def claim_marker(self, name: str) -> bool:
        """Take ``name`` as the key of a run-scoped marker; False if a step of the run has it."""
        with self.lock:
            if self.used(name):
                return False
            self.marker_keys.add(name)
            return True

    def claim(
        self, name: str, fp: str, owner: object
    ) -> tuple[str, Recorded | None, Recorded | None]:
        """Decide the key of a call of ``name`` with fingerprint ``fp`` by ``owner``.

        Returns ``(key, replay, mismatch)``: ``replay`` is the recorded row
        this call replays; ``mismatch`` is a recorded row at or before this
        call's position that was recorded for other arguments (the caller
        raises StepMismatchError). With neither, the call runs and is in
        flight until :meth:`release`.
        """
        # lock.acquire() and a finally, not ``with``: the statement's special-method
        # lookups cost as much as the lock itself (800 instructions, on every step).
        lock = self.lock
        lock.acquire()
        try:
            in_flight = self._in_flight
            # The usual calls, of a name not in flight and not used by an asyncio task yet:
            # decided as the rules below decide them, without their lookups.
            if self.fast and name not in in_flight and name not in self._task_names:
                if name not in self._names:  # a new name: it runs under its own name
                    if (
                        name not in self._calls
                        and name not in self.claimed
                        and name not in self.marker_keys
                    ):
                        self._calls[name] = 1
                        self.claimed.add(name)
                        in_flight[name] = [owner]
                        if type(owner) is not int:  # an asyncio task: the name is its own
                            self._task_owns(name, owner)
                        return name, None, None
                elif not self.marker_keys:
                    # A replay: the earliest recorded call with these very arguments.
                    q = self._names[name].by_fp.get(fp)
                    if q:
                        n = q.popleft()
                        key = name if n == 1 else f"{name}#{n}"
                        calls = self._calls
                        calls[name] = calls.get(name, 0) + 1
                        self.claimed.add(key)
                        if type(owner) is not int:
                            self._task_owns(name, owner)
                        return key, self.recorded[key], None
            owners = in_flight.get(name)
            if owners and any(o != owner for o in owners):
                raise ConcurrentStepError(
                    f"step {name!r} (run {self.run_id}) was called again while another call "
                    f"of the same name was still running in another thread or task; their "
                    f"keys could not be ordered. Give concurrent steps distinct names, e.g. "
                    f"f'{name}:{{item}}'",
                    run_id=self.run_id,
                    name=name,
                )
            if self._task_names:
                first = self._task_names.get(name)
                if first is not None and first[0]() is not owner and _loop_runs(first[1]):
                    raise ConcurrentStepError(
                        f"step {name!r} (run {self.run_id}) was already used by another asyncio "
                        f"task in this attempt; which of two tasks numbers its call first "
                        f"depends on timing, so their keys could not be ordered. Give each "
                        f"task's steps distinct names, e.g. f'{name}:{{item}}'{WAIT_FOR_HINT}",
                        run_id=self.run_id,
                        name=name,
                    )
            pos = self._calls.get(name, 0) + 1
            replay: Recorded | None = None
            state = self._names.get(name)
            if state is None:
                n = pos
                key = name if n == 1 else f"{name}#{n}"
                while key in self.claimed:
                    n += 1
                    key = f"{name}#{n}"
            else:
                # A recorded call with these very arguments (the usual replay): its
                # queue's first number, without _find()'s call.
                q = state.by_fp.get(fp)
                found = q.popleft() if q else self._find(state, fp)
                if found is not None:
                    key = name if found == 1 else f"{name}#{found}"
                    replay = self.recorded[key]
                else:
                    low = self._lowest_unclaimed(state, name)
                    if low is not None and low <= pos:
                        key = make_key(name, low)
                        return key, None, self.recorded[key]
                    n = pos
                    key = make_key(name, n)
                    while key in self.claimed or key in self.recorded:
                        n += 1
                        key = make_key(name, n)
            if key in self.marker_keys:
                raise InvalidNameError(
                    f"step {key!r} (run {self.run_id}): the key is already the name of a "
                    f"marker of this run; steps and run-scoped markers of a run share one "
                    f"set of keys; rename the step or the marker"
                )
            self._calls[name] = pos
            self.claimed.add(key)
            if type(owner) is not int:
                known = self._task_names.get(name)
                if known is None or known[0]() is not owner:
                    self._task_owns(name, owner)
            if replay is None:
                if owners is None:
                    self._in_flight[name] = [owner]
                else:
                    owners.append(owner)
        finally:
            lock.release()
        return key, replay, None

    def _task_owns(self, name: str, task: Any) -> None:
        """The asyncio ``task`` owns ``name`` while its event loop runs (lock held)."""
        self._task_names[name] = (weakref.ref(task), weakref.ref(task.get_loop()))

    def _find(self, state: _Name, fp: str) -> int | None:
        """The earliest unclaimed recorded number of this name with arguments ``fp``."""
        q = state.by_fp.get(fp)
        if q:
            return q.popleft()
        if not state.fuzzy and UNCHECKED not in fp:
            return None
        best: tuple[int, deque[int]] | None = None
        for recorded_fp, q in state.by_fp.items():
            if q and same_arguments(recorded_fp, fp) and (best is None or q[0] < best[0]):
                best = (q[0], q)
        if best is None:
            return None
        return best[1].popleft()

    def _lowest_unclaimed(self, state: _Name, name: str) -> int | None:
        numbers = state.numbers
        while state.low < len(numbers) and make_key(name, numbers[state.low]) in self.claimed:
            state.low += 1
        if state.low == len(numbers):
            return None
        # A number below ``low`` is claimed; above it, some may be (claimed out of
        # order by a fingerprint match): the lowest unclaimed is at ``low``.
        return numbers[state.low]

    def release(self, name: str, owner: object) -> None:
        """The call of ``name`` by ``owner`` is over (returned or raised).

        Without the lock (a lock costs a sixth of a fresh step's Python): only the
        owner of a name's calls in flight changes their entry while it exists,
        since any other owner's claim of the name raises then; each dict and list
        operation here is atomic.
        """
        in_flight = self._in_flight
        owners = in_flight[name]
        if len(owners) == 1:  # the usual call: its one owner (who is ``owner``)
            del in_flight[name]
        else:
            owners.remove(owner)
