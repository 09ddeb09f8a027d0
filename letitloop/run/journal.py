"""``Journal``: one goal's open run in one process, in front of its collaborators.

Opening it resumes the goal's newest unfinished run (or the named run),
holds it against other processes, and loads the run's recorded steps so that
replay is a dict lookup (``opening.py``). ``step()`` replays a recorded
result without calling the function (``replay.py``), or calls it and commits
its result before returning it (``steps.py``, ``async_steps.py``); closing
marks the run's end (``closing.py``). The rows are the storage's
(``storage.py``; SQLite: ``sqlite_storage.py``).

The journal writes none of the run's state after ``__init__``: each piece
has one owner that alone writes it, with its thread rules in its docstring
(``Journal.__init__`` lists them; docs/architecture.md, "Who owns a run's
state"; ``tests/test_architecture.py`` checks it).
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from .. import codec
from ..identity.fingerprint import Fingerprinter
from ..identity.names import check_name
from ..identity.versions import caller_version, check_version
from ..integrity.encryption import env_cipher, make_cipher
from ..primitives import budgets
from ..primitives.budgets import Budget, Spend
from ..stores.schemes import open_readonly_storage, open_storage
from ..stores.sqlite.pragmas import Durability
from ..testing import default_clock
from . import cancellation, closing, inflight, opening, ownership, steps, verbs
from .attempt import Attempt
from .generations import window
from .replay import forget_replays, mismatch, replay

if TYPE_CHECKING:
    # Not imported at run time by this module: markers.py by the first marker,
    # retry.py by the first retry policy, costs.py by the first usage() report,
    # async_steps.py by the first async step, sleeps.py and waits.py by the
    # first sleep or wait. `import letitloop` loads only what a step needs.
    from pathlib import Path

    from ..stores.storage import Storage
    from . import async_steps
    from . import retry as retries
    from .commits import LoopCommits
    from .otel import AttemptSpans
    from .retry import RetryPolicy

__all__ = ["DEFAULT_TIMEOUT", "Journal", "current_journal"]

T = TypeVar("T")

#: Default seconds a journal waits for a run held by another live process.
DEFAULT_TIMEOUT = 10.0

#: The innermost open journal of the current context (thread or task); what the
#: free functions step() and atomic_marker() use.
current_journal: ContextVar[Journal | None] = ContextVar("letitloop_journal", default=None)

#: ``Journal(goal)`` without ``input=``: the run records no input.
_NO_INPUT: Any = object()


class Journal:
    """One goal's run, held by this process while open.

    ``Journal(goal)`` resumes the goal's newest unnamed run that has not
    completed (crashed or failed) and was opened for the same ``input=``
    (none by default), or starts a new one. ``Journal(goal, run="key")``
    names the run: the same key always means the same run, and a completed
    run replays every step; ``reuse=`` (seconds, a ``timedelta``) bounds that:
    a named run completed longer ago starts the name's next generation
    (``name~2``: letitloop/run/generations.py), as ``fresh=True`` does at once.
    Use it as a context manager: a clean exit (or ``sys.exit(0)``) marks the
    run completed, an exception marks it failed
    with its error (the next open resumes it from the failed step).

    ``clock`` is the function timestamps come from (seconds since the epoch;
    tests pass a fake one, or ``letitloop.testing.SkippingClock``, whose
    pauses take no time); None: ``letitloop.testing.default_clock()``,
    ``time.time`` unless a test made another the default. ``registry`` is
    the codec registry for results.
    ``retry`` is the RetryPolicy of every step that does not pass its own.
    ``replay_only=True`` (or ``LETITLOOP_REPLAY=only``) replays the recorded
    run and writes nothing: an unrecorded step raises UnrecordedStepError
    without calling its function (docs/testing.md).
    ``budget=Budget(tokens=..., cost=...)`` (or a dict) stops the run with
    BudgetExceededError before a step would run once its spend, over all its
    attempts, has reached either limit (letitloop/primitives/budgets.py; shared_budgets.py).
    ``seal=key`` (or ``LETITLOOP_SEAL_KEY``) chains the run's rows under an
    HMAC key that ``lil verify`` checks; ``encryption_key=key`` (or
    ``LETITLOOP_ENCRYPTION_KEY``) stores results, errors and the input
    encrypted. Neither key is ever written to the file (docs/audit.md).
    ``version`` is the
    version of the code this attempt runs, recorded with the attempt (shown
    by ``lil runs``/``lil show``); by default a hash of the source file of the
    code that made the journal (letitloop/identity/versions.py, docs/versioning.md).

    Raises RunHeldError when another live process holds the run for longer
    than ``timeout`` seconds, JournalFileError when the file is unusable,
    SchemaVersionError when it comes from a newer letitloop, SealKeyError for
    a run sealed with another key, EncryptionKeyError for a recorded value
    that does not decrypt with the key given (or without one).
    """

    def __init__(
        self,
        goal: str,
        *,
        run: str | None = None,
        reuse: float | timedelta | None = None,
        fresh: bool = False,
        path: str | os.PathLike[str] | None = None,
        durability: Durability = "process",
        timeout: float = DEFAULT_TIMEOUT,
        registry: codec.CodecRegistry | None = None,
        clock: Callable[[], float] | None = None,
        input: Any = _NO_INPUT,
        retry: RetryPolicy | None = None,
        replay_only: bool | None = None,
        budget: Budget | Mapping[str, Any] | Spend | None = None,
        seal: str | bytes | None = None,
        encryption_key: str | bytes | None = None,
        version: str | None = None,
    ) -> None:
        self.goal = check_name("goal", goal)
        self.run_name = None if run is None else check_name("run", run)
        #: How long a completed generation of the named run is handed back, in seconds
        #: (None: forever; 0: ``fresh=True``); generations.py.
        self.reuse = window(goal, self.run_name, reuse, fresh)
        #: What the run is opened for (recorded on a new run; unnamed openers
        #: resume only a run opened for the same input).
        self.input = None if input is _NO_INPUT else input
        self._has_input = input is not _NO_INPUT
        if durability not in ("process", "power"):
            raise ValueError(f"durability must be 'process' or 'power', got {durability!r}")
        self._path_arg = path
        self.durability: Durability = durability
        self.timeout = timeout
        self.registry = registry
        self.clock = default_clock() if clock is None else clock
        self._fingerprints = Fingerprinter(registry)
        #: The retry policy of steps that pass none (letitloop/run/retry.py).
        self.retry = retry
        #: Replay-only: every step replays from the journal, an unrecorded one raises
        #: UnrecordedStepError without being called, nothing is written (the file is
        #: opened for reading only). None: ``LETITLOOP_REPLAY=only`` turns it on.
        self.replay_only = (
            os.environ.get("LETITLOOP_REPLAY") == "only" if replay_only is None else replay_only
        )
        #: The seal key (letitloop/integrity/seals.py): the run's final rows are chained under it.
        #: None: ``LETITLOOP_SEAL_KEY``, else no seal. Kept in memory, never in the file.
        self.seal_key: bytes | None = None
        if seal is not None or os.environ.get("LETITLOOP_SEAL_KEY"):  # seals.SEAL_KEY_ENV
            from ..integrity.seals import env_seal_key, seal_key  # loaded by programs that seal

            self.seal_key = env_seal_key() if seal is None else seal_key(seal)
        #: Encryption at rest (letitloop/integrity/encryption.py): results, errors, the input
        #: and the run's result stored encrypted. None: ``LETITLOOP_ENCRYPTION_KEY``, else none.
        self._cipher = env_cipher() if encryption_key is None else make_cipher(encryption_key)
        #: The version of the code the attempt runs, recorded with it (versions.py).
        self.version = caller_version() if version is None else check_version(version)
        # The run's state, each piece written by its one owner (the owner's docstring
        # says which thread writes it, which reads it, under which lock;
        # docs/architecture.md, "Who owns a run's state"):
        # - the attempt (opening.py): which run and attempt it is, public on the journal
        #   (``store``: the storage it writes through, storage.py; SQLite: ``SqliteStorage``,
        #   its connection ``.store``; None / empty while closed), and the rest of what the
        #   journal opened (attempt.Attempt: the run's lock, the attempt's keys and results).
        self.store: Storage | None = None
        self.run_id: str = ""
        #: The name of the run this attempt opened: ``run_name``, or a later generation of
        #: it (``name~2``: generations.py); None for an unnamed run.
        self.generation: str | None = None
        self.attempt = 0
        #: True when the run had already completed when this journal opened it.
        self.was_completed = False
        self._opened = Attempt()
        # - the steps in flight, their calls' usage and the watcher's view (inflight.Flight).
        self._flight = inflight.Flight()
        # - whether the run was cancelled, and the async steps to interrupt (cancellation.Cancel).
        self._cancel = cancellation.Cancel()
        # - the keys this attempt replayed, not yet written to step_replays (replay.py).
        self._replayed: deque[str] = deque()
        # - the run's failed tries, read once per attempt (retry.py; None: not read yet).
        self._tries: retries.Tries | None = None
        # - the run's budget and what it spent (budgets.Spend; None: no budget).
        self._budget = None if budget is None else budgets.spend_for(budget)
        # - the group commit of async steps, bound to its event loop (async_steps.py).
        self._loop_commits: LoopCommits | None = None
        # - the result recorded when the run completes (closing.py).
        self._result_text: str | None = None
        # - the process that opened the journal, and whether this process is a child
        #   forked from it, where the journal refuses everything (ownership.py).
        self._opener = ownership.Opener()
        # - the attempt's OpenTelemetry spans, None while tracing is off (otel.py).
        self._trace: AttemptSpans | None = None
        # - the context's current journal, set and reset by its ``with`` block's thread.
        self._tokens: list[Any] = []

    # -- opening and closing -------------------------------------------------

    @property
    def path(self) -> Path:
        """The journal file (or, on another store, its path or URL)."""
        if self.store:
            return self.store.path
        from pathlib import Path  # here: a step's path never needs pathlib (issue 30)

        return Path(self._path_arg or "")

    @property
    def table(self) -> str:
        """The table of the run's goal (SQLite: ``journal_<goal>``); ``""`` while closed."""
        return self._opened.table

    @property
    def is_open(self) -> bool:
        return self.store is not None

    def open(self) -> Journal:
        """Resume or start the run and hold it. Idempotent; ``with`` calls it for you."""
        if self.store is not None:
            return self
        began = time.time_ns()  # the attempt span's start (otel.py)
        if self._opener.disowned or ownership.inherited_files:  # only in a forked child
            ownership.check_open(self)
        replaying = open_readonly_storage(self._path_arg) if self.replay_only else None
        storage: Storage = (
            replaying if replaying is not None else open_storage(self._path_arg, self.durability)
        )
        try:
            forget_replays(self)  # a journal opened again is a new attempt
            opening.check_key(self, storage)  # another encryption key refused before a write
            if replaying is not None:
                opening.open_recorded(self, replaying)
            else:
                opening.open_run(self, storage)
            if self.seal_key is not None:
                opening.seal(self, storage, self.seal_key)
        except BaseException:
            opening.release(self)
            storage.close()
            raise
        ownership.opened(self)
        opening.opened(self, storage)
        # Spans only in a program that loaded OpenTelemetry (and set a provider: otel.begin).
        if "opentelemetry.trace" in sys.modules:
            from . import otel

            otel.begin(self, began)
        if self._budget is not None and not (self.replay_only or self.was_completed):
            budgets.opened(self)
        return self

    def close(self, exc: BaseException | None = None) -> None:
        """Mark the run completed (``exc`` is None) or failed with ``exc``, and release it.

        ``sys.exit(0)`` is a clean exit; RunWaiting leaves the run ``waiting``;
        a run this process learnt was cancelled is marked ``cancelled`` (see
        letitloop/run/closing.py).
        """
        closing.close(self, exc)

    def __enter__(self) -> Journal:
        self.open()
        self._tokens.append(current_journal.set(self))
        if self._trace is not None:
            self._trace.enter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._tokens:
            current_journal.reset(self._tokens.pop())
        if self._trace is not None:
            self._trace.leave()
        self.close(exc)

    async def __aenter__(self) -> Journal:
        """Open like ``with``, waiting for a held run in a worker thread (the loop keeps running).

        If the awaiting task is cancelled while the worker still waits, the
        journal is closed (its run marked failed) as soon as the worker gets it.
        """
        import asyncio

        opened = asyncio.ensure_future(asyncio.to_thread(self.open))
        try:
            await asyncio.shield(opened)
        except asyncio.CancelledError:
            opened.add_done_callback(lambda f: closing.close_if_opened(self, f))
            raise
        self._tokens.append(current_journal.set(self))
        if self._trace is not None:
            self._trace.enter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close like ``with``, once every returned step's row is committed (closing.aclose)."""
        if self._tokens:
            current_journal.reset(self._tokens.pop())
        if self._trace is not None:
            self._trace.leave()
        await closing.aclose(self, exc)

    def __repr__(self) -> str:
        state = f"run {self.run_id} attempt {self.attempt}" if self.store else "closed"
        return f"<Journal goal={self.goal!r} {state} path={str(self.path)!r}>"

    # -- the run's result (used by @durable; closing.py) ------------------------

    set_result = closing.set_result
    recorded_result = closing.recorded_result

    # -- steps (steps.py, async_steps.py, replay.py), bound without a call between -----

    step = steps.step
    if TYPE_CHECKING:
        async_step = async_steps.async_step
    else:

        def async_step(self, name, fn, /, *args, **kwargs):
            """:meth:`step` for async code: ``await j.async_step(name, fn, *args, **kwargs)``."""
            # async_steps.py is loaded by the first async step, not by `import
            # letitloop`; from then on the method is its function, bound directly.
            from .async_steps import async_step

            Journal.async_step = async_step
            return async_step(self, name, fn, *args, **kwargs)

    _require_open = ownership.require_open
    _require_storage = ownership.require_storage
    _owner = steps.owner
    _key_for = steps.key_for
    _replay = replay
    _mismatch = mismatch

    # -- sleeps, waits, patches and markers (verbs.py: each loads its module on first use)

    sleep = verbs.sleep
    async_sleep = verbs.async_sleep
    wait_for = verbs.wait_for
    async_wait_for = verbs.async_wait_for
    patched = verbs.patched
    async_patched = verbs.async_patched
    deprecate_patch = verbs.deprecate_patch
    async_deprecate_patch = verbs.async_deprecate_patch
    atomic_marker = verbs.atomic_marker


def location_of(j: Journal) -> str | os.PathLike[str] | None:
    """Where ``j`` was asked to live, as given (``path=``: a file, or a store's URL such as
    ``memory://x`` or ``postgresql://…``); None: the default, found as ``Journal`` finds
    it. What ``inspection.open_inspector`` takes to read it (``j.path`` is a file's path)."""
    return j._path_arg


# `lil crashtest` runs the program with a ledger: then, and only then, steps and
# markers are wrapped to note their bodies and die where told (crashhook.py). One
# look at the environment at import; the step path is unchanged otherwise.
if os.environ.get("LETITLOOP_CRASHTEST_LEDGER"):  # crashhook.LEDGER_ENV
    from . import crashhook

    crashhook.install(Journal)
