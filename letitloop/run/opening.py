"""Which run an opener gets, and holding it: the run's hold, and the runs this process holds.

``open_run`` resolves the run (the named one, or the goal's newest
resumable unnamed one for the same input, or a new one), waits for a
holder, claims it as a new attempt and loads its recorded steps; the
rows and the hold are the storage's (``storage.py``: a lock file beside
a SQLite journal).

This module is the one owner of a journal's attempt: its ``attempt.Attempt``
(``Journal._opened``: the storage it writes through, the run's lock, the
attempt's keys and results, …), whose fields no other module writes, and
the attempt's public face on the journal (``store``, ``run_id``,
``generation``, ``attempt``, ``was_completed``). Thread rules: they are
written by the thread that opens the journal (``open_run``, then
:func:`opened`, which sets ``store`` last) and by the thread that closes it
(:func:`closed`, which clears ``store`` first), never both at once (a
journal is opened and closed by one owner: its ``with`` block, or the
worker thread of ``async with``); in a forked child, by the at-fork hook
(:func:`disown`), while the child has one thread. Any thread stepping in the
journal reads them without a lock: a reader that finds ``store`` set finds
the rest of the attempt set.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Hashable
from functools import partial
from typing import TYPE_CHECKING, Any

from .. import codec
from ..errors import EncodeError, RunHeldError, SealKeyError, UnrecordedStepError
from ..identity.ids import HOST
from ..identity.keys import Recorded, StepKeys
from ..integrity.encryption import key_refusal
from . import cancellation, generations, ownership
from .attempt import not_open
from .generations import is_generation
from .replay import Results

if TYPE_CHECKING:
    from ..stores.storage import ReplayStorage, Storage
    from ..stores.storage_holding import Holding
    from ..stores.storage_runs import RunDecision, RunRows, RunState
    from ..stores.storage_seals import SealRows
    from ..stores.storage_steps import StepRow
    from .journal import Journal

# Runs held by journals of this process: (journal file identity, run id) -> the
# thread that opened it. A second journal on the same run waits for it like a
# journal of another process would, except in the very thread that holds it,
# where waiting could never end.
_held: dict[tuple[Hashable, str], int] = {}
_open_journals: list[Journal] = []
_registry_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # Another thread of the parent may hold the lock at the fork: the child's would never open.
    global _registry_lock
    _registry_lock = threading.Lock()
    # Every journal open in the parent is disowned here (ownership.py says why).
    for j in forget_after_fork():
        disown(j, ownership.disown(j))
        j._flight.drop()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def open_journals() -> list[Journal]:
    """The journals open in this process, oldest first."""
    with _registry_lock:
        return list(_open_journals)


def opened(j: Journal, storage: Storage) -> None:
    """``j``'s attempt is open: write through ``storage``; count it as open."""
    j._opened.table = storage.table
    j._opened.storage = storage
    j._opened.write_step = storage.write_step
    j._flight.reopen()
    j.store = storage  # last: a reader that finds the store finds the attempt
    with _registry_lock:
        _open_journals.append(j)


def closed(j: Journal) -> None:
    """``j`` is no longer open (its run already released, its store given back)."""
    j.store = None  # first: a reader that finds the store still finds the attempt
    j._opened.storage = None
    j._opened.write_step = not_open
    with _registry_lock:
        if j in _open_journals:
            _open_journals.remove(j)


def disown(j: Journal, refuse: Callable[[StepRow], None]) -> None:
    """In a forked child: ``j`` is its parent's, so nothing here writes or releases its run.

    ``refuse`` is the step-row writer left in its place (ownership.py's
    ForkedJournalError). The child holds neither the run's lock nor an entry
    among the runs this process holds (locks.py closed its copy of the
    lock's descriptor): nothing here may release, nor unlink, the parent's
    lock file.
    """
    j.store = None
    j._opened.storage = None
    j._opened.write_step = refuse
    j._opened.lock = None
    j._opened.held_key = None


def forget_after_fork() -> list[Journal]:
    """In a forked child: the journals its parent had open, no longer counted as open here.

    The child holds none of its parent's runs (its copies of their lock
    descriptors are closed: locks.py), and the registry starts anew
    (ownership.py). Its lock was remade already, by the same at-fork hook.
    """
    inherited = list(_open_journals)
    _open_journals.clear()
    _held.clear()
    return inherited


def encode_input(value: Any, registry: codec.CodecRegistry | None) -> str:
    """A run's input as codec JSON text; parts the codec cannot encode become their type names.

    Never raises for an unencodable value: recording what a run was called
    with must not prevent the call.
    """
    try:
        return codec.encode(value, registry)
    except EncodeError:
        pass
    if type(value) is dict:
        safe: dict[Any, Any] = {}
        for k, v in value.items():
            try:
                codec.encode(v, registry)
            except EncodeError:
                v = _type_label(v)
            safe[k if type(k) is str else _type_label(k)] = v
        with contextlib.suppress(EncodeError):
            return codec.encode(safe, registry)
    return codec.encode(_type_label(value), registry)


def _type_label(value: Any) -> str:
    t = type(value)
    return f"<{t.__module__}.{t.__qualname__}>"


def open_run(j: Journal, storage: Storage) -> None:
    """Find or start ``j``'s run, hold it, claim it as a new attempt and load its steps."""
    input_text = input_fp = None
    if j._has_input:
        input_text = encode_input(j.input, j.registry)
        # Strict for an unnamed run, which the input picks: no value counts by its type.
        input_fp = j._fingerprints.whole(j.input, strict=j.run_name is None)
        if j._cipher is not None:  # bound to the goal and the input's fingerprint
            input_text = j._cipher.seal(input_text, input_fp or "", j.goal, "input")
    asked = j.clock()  # an answer completed since is never too old (generations.py)
    while True:
        name = _generation(j, storage, asked)
        run_id, started = storage.find_or_start_run(
            j.goal,
            name,
            input_fp,
            input_text,
            j.clock(),
            lambda rid: hold(j, storage, rid),
            version=j.version,
        )
        if started:
            j.run_id = run_id
            j.generation = name
            j.attempt = 1
            j._opened.created = True  # nothing recorded to load, no tries to read (retry.py)
            j._opened.keys = StepKeys(run_id)
            j._opened.results = Results(storage, [])
            return
        if j._opened.lock is None:
            hold(j, storage, run_id)
        claim, found = storage.claim_run(
            run_id, j.clock(), partial(decide, j, run_id, name), version=j.version
        )
        if claim == "again":
            release(j)
            continue
        if claim == "cancel":
            raise cancellation.error(j)  # open() releases the run
        assert found is not None
        j.was_completed = claim == "replay"
        _recorded(j, storage, run_id, name, found.result, found.attempts)
        return


def _generation(j: Journal, storage: RunRows, asked: float | None) -> str | None:
    """The name of the run ``j``'s opener gets: the newest generation of its run's name, or
    the next one when that completed too long before ``asked`` (generations.py); None
    for an unnamed run. ``asked`` None: the newest, whenever it completed (replay-only)."""
    name = j.run_name
    if name is None or is_generation(name):
        return name
    rows = storage.generation_rows(j.goal, name, generations.prefix(name))
    return generations.current(rows, name, asked or 0.0, None if asked is None else j.reuse)


def seal(j: Journal, storage: SealRows, secret: bytes) -> None:
    """Seal ``j``'s run with ``secret`` from now on (letitloop/integrity/seals.py): before
    any step of the attempt is written; and read its chain, so that every row the attempt replays is
    checked against its seal first (``sealcheck.check_sealed``). Raises SealKeyError for a
    store that keeps no seals, or a run sealed with another key.

    Replay-only writes nothing, so it seals nothing: it checks the run's chain as it is
    (a run that has none, never sealed, replays unchecked).
    """
    start = getattr(storage, "seal_run", None)
    if start is None:
        raise SealKeyError(
            f"run {j.run_id} of goal {j.goal!r}: a seal key was given (seal= or "
            f"LETITLOOP_SEAL_KEY), but this journal's store keeps no sealed chain (SQLite, "
            f"PostgreSQL and memory:// do): unset the key, or use one of those stores"
        )
    if not j.replay_only:
        start(j.run_id, secret)
    from ..integrity.chains import SealedRows  # loaded by programs that seal

    sealed = SealedRows(j.run_id, secret)
    sealed.extend(storage.seal_entries(j.run_id, 0))
    j._opened.sealed = sealed if sealed.n or not j.replay_only else None


def check_key(j: Journal, storage: Storage) -> None:
    """Refuse (EncryptionKeyError) to open ``j``'s goal with another encryption key than its
    values are encrypted with, or without one, before anything is written; record the key's
    check value when the goal has none (encryption.py; SQLite's sqlite_keychecks.py,
    PostgreSQL's ``ll_key_checks``, memory's ``key_checks``). A store that keeps no check
    value (one without ``key_check``) is not checked here."""
    checked = getattr(storage, "key_check", None)
    if checked is None:
        return
    cipher = j._cipher
    stored = checked(j.goal, None if cipher is None else cipher.check, j.clock())
    if stored is None:  # no encrypted value in the goal: nothing to refuse (key_refusal)
        return
    refused = key_refusal(f"goal {j.goal!r} in {storage.path}", stored, cipher)
    if refused is not None:
        raise refused


def open_recorded(j: Journal, storage: ReplayStorage) -> None:
    """Replay-only: find ``j``'s recorded run and load its steps, writing nothing, holding nothing.

    The named run, else the goal's newest unnamed run opened for the same
    input, whatever its status (closing.py writes nothing for it). Raises
    UnrecordedStepError when there is none.
    """
    input_fp = None
    if j._has_input:
        input_fp = j._fingerprints.whole(j.input, strict=j.run_name is None)
    name = _generation(j, storage, None)
    found = storage.recorded_run(j.goal, name, input_fp)
    if found is None:
        which = f"run {j.run_name!r}" if j.run_name is not None else "no unnamed run"
        if j._has_input and j.run_name is None:
            which += " for this input"
        raise UnrecordedStepError(
            f"replay-only: {storage.path} holds {which} of goal {j.goal!r} "
            f"{'not recorded' if j.run_name is not None else 'recorded'}; nothing was called. "
            f"Record the run first (open the journal without replay_only), or pass the right "
            f"path= and run="
        )
    run_id, state = found
    j.was_completed = state.status == "completed"
    _recorded(j, storage, run_id, name, state.result, state.attempts)


def _recorded(
    j: Journal,
    storage: Storage,
    run_id: str,
    name: str | None,
    result: str | None,
    attempts: int,
) -> None:
    """``j``'s attempt of the recorded run ``run_id`` (``name``: its generation): its
    recorded ``result`` (decrypted), its number, its steps' keys and results loaded."""
    j._opened.recorded_result = result
    if j._cipher is not None:
        j._opened.recorded_result = j._cipher.open(result, run_id, "", "run result")
    j._opened.created = False
    j.run_id = run_id
    j.generation = name
    j.attempt = max(attempts, 1)
    rows, markers = storage.recorded_steps(run_id)
    keys = StepKeys(run_id)
    keys.load([Recorded(*r) for r in rows])
    keys.marker_keys = markers
    j._opened.keys = keys
    j._opened.results = Results(storage, sorted([r[3] for r in rows]))


def decide(j: Journal, run_id: str, name: str | None, found: RunState | None) -> RunDecision:
    """What ``j``'s opener does with the run it found, once it holds it (``name``: the
    generation of its run's name it asked for; generations.py).

    A completed named run is replayed: whether it was too old for the
    opener's ``reuse=`` was judged before the opener waited (``_generation``),
    so an answer completed while it waited for the holder is handed back.

    The rules apply afresh to what is found after waiting for a holder: a run
    forgotten meanwhile ('lil reset', 'lil gc'), a name handed to a fork ('lil
    fork'), or an unnamed run that its holder completed or that was cancelled
    (an unnamed opener then starts a new run) means: look again. A named run
    that was cancelled is refused (cancellation.py).
    """
    status, _, _, _, cancel_at, why = found or ("completed", 0, None, None, None, None)
    cancelled = status == "cancelled" or (cancel_at is not None and status != "completed")
    if (
        found is None
        or found.name != name
        or (status == "completed" and j.run_name is None)
        or (cancelled and j.run_name is None)
    ):
        return "again"
    if cancelled:
        j.run_id = run_id
        j._cancel.note(f"{why or 'cancelled'}, at {cancel_at}")
        return "cancel"
    return "replay" if status == "completed" else "resume"


def hold(j: Journal, storage: Holding, run_id: str) -> None:
    """Take ``run_id``'s hold for ``j`` (storage.py), waiting up to ``j.timeout`` for its holder."""
    key = (storage.identity, run_id)
    me = threading.get_ident()
    with _registry_lock:
        mine = _held.get(key) == me
    # Held by a journal still open in this very thread: waiting would never end.
    # (Not when that holder is gone without closing, as a journal abandoned on
    # the in-memory store is: memory_storage.abandon.)
    if mine and storage.is_run_held(run_id):
        raise RunHeldError(
            f"run {run_id} of goal {j.goal!r} is already open in this thread "
            f"(pid {os.getpid()}), by a Journal that is still open around this one; "
            f"waiting for it would never end. Close the other Journal first, or name "
            f"a different run",
            run_id=run_id,
            pid=os.getpid(),
            host=HOST,
        )
    # Another journal of this process holding the run (another thread, a task
    # whose opener runs in a worker thread) is waited for like another
    # process: each hold is its own holder (SQLite: its own lock file
    # descriptor, and flock excludes descriptors, not processes).
    lock = storage.run_hold(run_id)
    if not lock.acquire(j.timeout):
        with _registry_lock:
            thread = _held.get(key)
        pid: int | None
        host: str | None
        if thread is not None:
            holder = f"another Journal of this process (pid {os.getpid()}, thread {thread})"
            pid, host = os.getpid(), HOST
        else:
            found = storage.run_holder(run_id)
            pid, host, since = found or (None, None, None)
            holder = f"process {pid} on {host} (since {since})"
        raise RunHeldError(
            f"run {run_id} of goal {j.goal!r} is held by {holder}; waited "
            f"{j.timeout:g} s. Wait for it to finish, stop it, or pass a longer timeout=",
            run_id=run_id,
            pid=pid,
            host=host,
        )
    with _registry_lock:
        _held[key] = me
    j._opened.held_key = key
    j._opened.lock = lock


def release(j: Journal) -> None:
    """Let go of ``j``'s run: its lock, and its entry among the runs this process holds."""
    if j._opened.held_key is not None:
        with _registry_lock:
            _held.pop(j._opened.held_key, None)
        j._opened.held_key = None
    if j._opened.lock is not None:
        lock, j._opened.lock = j._opened.lock, None
        lock.release()
