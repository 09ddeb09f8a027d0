"""``atomic_marker``: a side effect guarded once, by a two-tier lock and its record.

A marker is a row: of the goal's journal table for ``scope="run"`` (``run`` =
the run id) and ``scope="goal"`` (``run`` = ``'*'``), of the ``markers`` table
for ``scope="global"``. Its status goes ``pending`` (a holder is inside the
block, or died there) to ``done`` (the block exited cleanly); ``failed``
records a block that raised.

Entering a marker:

1. Read the row. ``done``: yield false at once, without taking any lock.
2. Take the process-local lock of the marker (threads of this process;
   ``markerlocks.py``), then its lock file (other processes), both through
   ``markerhold.py``. Both are per marker, so unrelated markers never wait
   for each other.
3. In one write transaction, read the row again and claim it: write this
   holder's identity (pid, host, run, a random token). A ``pending`` row found
   under both locks belonged to a holder that died inside the block (a live
   holder would still hold the lock file): take it over and count the crash.
4. Leaving the block commits ``done`` (or ``failed`` with the error) only
   where the row still carries this holder's token: a holder that lost its
   claim cannot mark the marker done (MarkerLostError).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal

from ..errors import (
    InvalidNameError,
    LetItLoopError,
    MarkerHeldError,
    MarkerLostError,
    error_text,
    traceback_text,
)
from ..identity.ids import HOST as _HOST
from ..identity.names import check_name
from ..stores.storage_markers import MarkerAt
from .markerhold import MarkerHold

if TYPE_CHECKING:
    from ..run.otel import OpenSpan
    from ..stores.storage_markers import MarkerStore
    from .runs import MarkedRun

Scope = Literal["run", "goal", "global"]
SCOPES: tuple[Scope, ...] = ("run", "goal", "global")

#: The ``run`` column of goal-scoped markers: shared by every run of the goal.
#: Run ids are ULIDs, so this can never be a run's id.
GOAL_SCOPE_RUN = "*"

__all__ = ["GOAL_SCOPE_RUN", "SCOPES", "AtomicMarker", "MarkerOffer", "Scope"]


class MarkerOffer:
    """What ``with atomic_marker(name) as should_execute`` yields.

    True when this holder should run the guarded side effect (nobody has
    completed it), false when it was already done. Carries the marker's
    ``idempotency_key`` (stable across attempts and restarts: pass it to the
    remote service), ``attempt`` (how many times the marker has been offered,
    this offer included; for a false offer, the attempt that completed it) and
    ``crashed_before`` (an earlier holder died inside the block, so its side
    effect may or may not have happened).
    """

    __slots__ = ("_offered", "attempt", "crashed_before", "idempotency_key", "name", "scope")

    def __init__(
        self,
        offered: bool,
        *,
        name: str,
        scope: Scope,
        idempotency_key: str,
        attempt: int,
        crashed_before: bool,
    ) -> None:
        self._offered = offered
        self.name = name
        self.scope: Scope = scope
        self.idempotency_key = idempotency_key
        self.attempt = attempt
        self.crashed_before = crashed_before

    def __bool__(self) -> bool:
        return self._offered

    def __repr__(self) -> str:
        return (
            f"<MarkerOffer {self._offered} {self.name!r} scope={self.scope!r} "
            f"idempotency_key={self.idempotency_key!r} attempt={self.attempt} "
            f"crashed_before={self.crashed_before}>"
        )


# -- the marker --------------------------------------------------------------------


class AtomicMarker:
    """The context manager returned by ``atomic_marker()``; see the module docstring.

    Use it once, with ``with`` (or ``async with``). Raises MarkerHeldError when
    another holder stays inside the block longer than ``timeout`` seconds,
    MarkerLostError when this holder's claim was taken from it before it
    could commit, InvalidNameError for a name that a step of the run uses.
    """

    def __init__(
        self, journal: MarkedRun, name: str, *, scope: Scope = "run", timeout: float
    ) -> None:
        self.name = check_name("marker", name)
        if scope not in SCOPES:
            raise LetItLoopError(
                f"atomic_marker({name!r}): scope must be 'run', 'goal' or 'global', got "
                f"{scope!r}; 'run' guards once per run, 'goal' once across every run of "
                f"the goal, 'global' once across the whole journal file"
            )
        if not isinstance(timeout, (int, float)) or math.isnan(timeout) or timeout < 0:
            raise LetItLoopError(
                f"atomic_marker({name!r}): timeout must be a number of seconds >= 0 "
                f"(math.inf waits forever), got {timeout!r}"
            )
        self.journal = journal
        self.scope: Scope = scope
        self.timeout = float(timeout)
        self._used = False
        self._hold: MarkerHold | None = None
        self._storage: MarkerStore | None = None
        self._at = MarkerAt(scope, "", self.name, "")
        self._token = ""
        self._started = 0.0
        #: The block's span while it runs, when tracing is on (otel.py).
        self._span: OpenSpan | None = None

    # -- identity ------------------------------------------------------------

    @property
    def idempotency_key(self) -> str:
        """``{run_id}:{name}`` (run scope), ``{goal}:{name}`` (goal), ``{name}`` (global)."""
        if self.scope == "run":
            return f"{self.journal.run_id}:{self.name}"
        if self.scope == "goal":
            return f"{self.journal.goal}:{self.name}"
        return self.name

    def _describe(self) -> str:
        j = self.journal
        if self.scope == "run":
            return f"marker {self.name!r} (run {j.run_id} of goal {j.goal!r})"
        if self.scope == "goal":
            return f"marker {self.name!r} (scope='goal' of goal {j.goal!r})"
        return f"marker {self.name!r} (scope='global')"

    def _begin(self) -> None:
        if self._used:
            raise LetItLoopError(
                f"{self._describe()}: this atomic_marker(...) object was already entered; "
                f"call atomic_marker({self.name!r}) again for each 'with' block"
            )
        self._used = True
        j = self.journal
        store = j._require_open()
        self._storage = j._require_storage()
        if self.scope == "global":
            run = owner = ""
        else:
            run = j.run_id if self.scope == "run" else GOAL_SCOPE_RUN
            owner = j.run_id if self.scope == "run" else j.goal
        self._at = MarkerAt(self.scope, run, self.name, j.goal)
        # NUL cannot occur in names (check_name), so the parts cannot run together.
        # The lock file's name leaves the journal's path out: its folder is beside
        # the journal already, and two containers that mount one volume at two
        # paths must still meet on one lock file (MarkerHold adds the file's
        # identity to its process-local key).
        self._hold = MarkerHold(store, f"{self.scope}\0{owner}\0{self.name}", self._describe())

    # -- rows ----------------------------------------------------------------

    def _check_kind(self, kind: str) -> None:
        if kind != "marker":
            raise InvalidNameError(
                f"{self._describe()}: the name is already the key of a step of this run; "
                f"steps and run-scoped markers of a run share one set of keys; rename the "
                f"marker (e.g. {self.name + ':sent'!r}) or the step"
            )

    def _offer_from(self, offered: bool, claims: int, crashes: int) -> MarkerOffer:
        return MarkerOffer(
            offered,
            name=self.name,
            scope=self.scope,
            idempotency_key=self.idempotency_key,
            attempt=claims,
            crashed_before=crashes > 0,
        )

    def _already_done(self) -> MarkerOffer | None:
        """The false offer of a marker that is done, read without any lock; else None."""
        assert self._storage is not None
        found = self._storage.marker(self._at)
        if found is None:
            self._refuse_unrecorded()
            return None
        self._check_kind(found.kind)
        if found.status == "done":
            self._check_seal()
            return self._offer_from(False, found.claims or 0, found.crashes or 0)
        self._refuse_unrecorded()
        return None

    def _check_seal(self) -> None:
        """A run-scoped marker recorded done, in a run sealed with the journal's key: its
        row must be what its seal covers, or ForgedRowError (nothing skipped, nothing run).
        Goal and global markers are in no run's chain (docs/audit.md)."""
        j = self.journal
        if j._opened.sealed is not None and self.scope == "run":
            from ..integrity.sealcheck import check_stored, read_sealed

            check_stored(j, self.name, "marker", read_sealed(j, self.name))

    def _refuse_unrecorded(self) -> None:
        """In a replay-only journal, a marker not recorded done raises UnrecordedStepError."""
        if self.journal.replay_only:
            from ..errors import unrecorded_step

            j = self.journal
            raise unrecorded_step(j.run_id, j.goal, j.path, self.name, "letitloop.atomic_marker")

    def _claim(self) -> MarkerOffer:
        """Under both locks: the false offer if done, else claim the row and offer it."""
        storage, j = self._storage, self.journal
        assert storage is not None
        token = os.urandom(8).hex()
        now = j.clock()
        holder = (os.getpid(), _HOST, j.run_id, token)
        claim = storage.claim_marker(self._at, holder, now, j.attempt)
        self._check_kind(claim.kind)
        if not claim.offered:
            self._check_seal()
            return self._offer_from(False, claim.claims, claim.crashes)
        self._token = token
        self._started = now
        return self._offer_from(True, claim.claims, claim.crashes)

    def _finish(self, exc: BaseException | None) -> None:
        """Commit done (``exc`` is None) or failed, only if the claim is still ours."""
        storage, j = self._storage, self.journal
        assert storage is not None
        now = j.clock()
        duration = (now - self._started) * 1000.0
        failure = None
        if exc is not None:
            # Interrupted or cancelled (not an Exception): the holder stopped at an
            # unknown point of the block, so its side effect may have happened: the
            # next holder is told, as after a crash (crashed_before).
            interrupted = 0 if isinstance(exc, Exception) else 1
            error, tb = error_text(exc), traceback_text(exc)
            if j._cipher is not None:  # encryption at rest (letitloop/integrity/encryption.py)
                error = j._cipher.seal(error, self._at.run, self._at.name, "error")
                tb = j._cipher.seal(tb, self._at.run, self._at.name, "traceback")
            failure = (error, tb, interrupted)
        lost, now_row = storage.finish_marker(self._at, self._token, now, duration, failure)
        if lost and exc is None:
            if now_row is None:
                found = "its row is gone (was the run reset?)"
            else:
                found = (
                    f"its row now says {now_row.status!r}, held by process "
                    f"{now_row.holder_pid} on {now_row.holder_host} (run "
                    f"{now_row.holder_run}, since {now_row.started_at})"
                )
            raise MarkerLostError(
                f"{self._describe()}: this holder (process {os.getpid()} on {_HOST}) lost its "
                f"claim while inside the block: {found}; it was not marked done. The side "
                f"effect may have run twice: reconcile it upstream with idempotency key "
                f"{self.idempotency_key!r}",
                name=self.name,
                idempotency_key=self.idempotency_key,
            )

    def _held_error(self) -> MarkerHeldError:
        """The error of a wait that timed out, naming the holder."""
        assert self._hold is not None and self._storage is not None
        return self._hold.held_error(self._storage, self._at, self.name, self.timeout)

    # -- with / async with ---------------------------------------------------

    def _release(self) -> None:
        if self._hold is not None:
            self._hold.release()

    def _after_locks(self) -> MarkerOffer:
        try:
            offer = self._claim()
        except BaseException:
            self._release()
            raise
        if not offer:
            self._release()  # done by an earlier holder: nothing to guard
        elif self.journal._trace is not None:
            self._span = self.journal._trace.marker(
                self.name, self.scope, offer.attempt, offer.crashed_before
            )
        return offer

    def __enter__(self) -> MarkerOffer:
        self._begin()
        done = self._already_done()
        if done is not None:
            return done
        assert self._hold is not None
        thread = threading.current_thread()
        if not self._hold.acquire(thread.ident, f"thread {thread.name!r}", self.timeout):
            raise self._held_error()
        return self._after_locks()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._hold is None or not self._hold.holding:
            return
        if self.journal._opener.disowned:
            # A child forked inside the block: the locks and the claim are its
            # parent's; it commits nothing and releases nothing (ownership.py).
            self._hold = None
            self.journal._require_open()  # raises ForkedJournalError
        try:
            if exc is None:
                self._finish(None)
            else:
                # The block's own exception matters more than its failed record.
                with contextlib.suppress(LetItLoopError):
                    self._finish(exc)
        finally:
            self._release()
            if self._span is not None:
                self._span.end(exc, **{"marker.status": "done" if exc is None else "failed"})

    async def __aenter__(self) -> MarkerOffer:
        import asyncio  # here, not at the top: sync programs do not pay its import time

        self._begin()
        done = self._already_done()
        if done is not None:
            return done
        task = asyncio.current_task()
        thread = threading.current_thread()
        owner: object = task or thread.ident
        who = f"task {task.get_name()!r} in thread {thread.name!r}" if task else thread.name
        # Uncontended: take both locks here, without a hop to a worker thread.
        hold = self._hold
        assert hold is not None
        if not hold.acquire(owner, who, 0.0) and not await hold.acquire_in_thread(
            owner, who, self.timeout
        ):
            raise self._held_error()
        return self._after_locks()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    @property
    def lock_file(self) -> Path:
        """The lock file of this marker (known once entered): for debugging and tests."""
        if self._hold is None:
            raise LetItLoopError(f"{self!r}: enter the marker first")
        return self._hold.lock_file

    def __repr__(self) -> str:
        return f"<AtomicMarker {self.name!r} scope={self.scope!r}>"
