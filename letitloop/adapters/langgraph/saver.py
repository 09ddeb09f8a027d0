"""``LetItLoopCheckpointSaver``: LangGraph's checkpoints and writes as rows of the journal file.

Every sync method of ``BaseCheckpointSaver`` and its ``a*`` twin
(``get_tuple``, ``list``, ``put``, ``put_writes``, ``delete_thread``,
``delete_for_runs``, ``copy_thread``, ``prune``). Checkpoints and pending
writes are rows of the tables ``langgraph_checkpoints`` and
``langgraph_writes`` (the adapter's own migration set, ``tables.py``) in the
same journal file as the steps: ids and metadata as text, the payload
exactly as the saver's serde gives it. The class is the thin front: its
methods read in ``reading.py``, write in ``writing.py`` and change whole
threads in ``threads.py``.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...stores.sqlite.pragmas import Durability
from ...stores.sqlite.store import Store
from . import polled, reading, tables, threads, writing
from .requests import REUSE_SECONDS
from .serde import AllowedType, strict_serde

#: How many listed checkpoints ``alist`` decodes per trip to the worker thread:
#: large enough that thread hand-offs cost little, small enough that the first
#: tuples arrive before a long history is decoded.
_ALIST_BATCH = 64


class LetItLoopCheckpointSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that keeps its checkpoints in the letitloop journal file.

    ``LetItLoopCheckpointSaver()`` uses the same journal file as ``Journal``:
    ``path=`` if given, else ``$LETITLOOP_DB``, else ``.letitloop/journal.db``.
    Any number of savers, threads and processes may share one file: every
    write is one short transaction (one statement in autocommit mode where
    it can be) and a writer waits for another's lock, in short polls up to
    30 s (``polled.py``), instead of failing with "database is locked".

    ``durability`` is the journal's: ``"process"`` (default) survives the death
    of the process, ``"power"`` also a power loss (an fsync per commit).

    Nothing is rebuilt from a row unless it is on an allow-list: ``serde``
    defaults to :func:`strict_serde`, LangGraph's ``JsonPlusSerializer`` in its
    strict mode (msgpack, no pickle), which rebuilds LangGraph's safe types,
    the types of the graph's state schema (``compile()`` adds them) and
    ``allowed_types`` (classes or ``(module, name)`` pairs); anything else
    comes back as its recorded fields. Pass ``serde=`` to choose another
    serializer, e.g. ``JsonPlusSerializer(allowed_msgpack_modules=True)`` to
    rebuild any type a row names (only for a file you trust: a forged row can
    then run code).

    Deleting a thread (``delete_thread``, ``prune(strategy="delete")``),
    pruning its history (``prune``), deleting LangGraph runs
    (``delete_for_runs``) and copying over a thread (``copy_thread``) also
    retire the ``durable_node`` runs in this file that the change makes
    unreachable, in the same transaction (see ``retire.py``).

    A graph compiled with this saver runs one invocation of a thread at a
    time, whole, and the same request asked again (the same input on the
    state it left, a rerun program's turns) is answered from the thread's
    checkpoints instead of running again, for ``reuse`` seconds after it
    finished (an hour by default); see ``invocations.py`` and ``requests.py``.

    The async methods run the sync ones in a worker thread
    (``asyncio.to_thread``): the event loop never waits on SQLite, not even
    for a commit.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        durability: Durability = "process",
        serde: SerializerProtocol | None = None,
        allowed_types: Iterable[AllowedType] = (),
        reuse: float = REUSE_SECONDS,
    ) -> None:
        allowed = tuple(allowed_types)
        if serde is not None and allowed:
            raise ValueError(
                "pass allowed_types= or serde=, not both: allowed_types widens the default "
                "strict serde; give your own serde its allow-list yourself"
            )
        super().__init__(serde=serde if serde is not None else strict_serde(allowed))
        self._closing: list[Callable[[], None]] = []
        #: Seconds a finished request asked again is answered from the thread's
        #: checkpoints instead of running the graph (requests.py).
        self.reuse = float(reuse)
        self.store = Store(path, durability=durability)
        try:
            tables.ensure(self.store)  # the saver's tables, on its first use of the file
        except BaseException:
            self.store.close()
            raise
        # Every statement on this connection goes through polled.py, which
        # waits for a held lock in short polls instead of SQLite's sleeps.
        polled.take_over(self.store)

    # -- lifetime --------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The journal file."""
        return self.store.path

    def close(self) -> None:
        """Close the connection to the journal file. Every write was already committed."""
        closing, self._closing = self._closing, []
        for fn in closing:
            fn()
        self.store.close()

    def when_closed(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` when this saver is closed (what ``invocations.py`` holds for it)."""
        self._closing.append(fn)

    def __enter__(self) -> LetItLoopCheckpointSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> LetItLoopCheckpointSaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<LetItLoopCheckpointSaver path={str(self.store.path)!r}>"

    def wait_for_writes(self) -> None:
        """Return once every write this saver's connection has begun is committed.

        LangGraph hands a saver its writes in background threads, and goes on
        without waiting: with ``durability="async"`` the answer of a
        ``Command(resume=...)`` is being written while the resumed node
        already runs. A ``durable_node`` calls this before its journal writes
        anything to the same file, so a node's journal commits never push
        LangGraph's own write behind them.
        """
        with self.store.lock:  # held by a write from BEGIN to COMMIT
            pass

    # -- versions --------------------------------------------------------------

    def get_next_version(self, current: str | int | None, channel: None) -> str:
        """The next channel version: ``<32-digit counter>.<random>``, as LangGraph's savers do.

        The same format as ``SqliteSaver`` and ``InMemorySaver`` use, so a thread
        moved between savers keeps comparable versions.
        """
        return writing.next_version(current)

    # -- reading (reading.py) --------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (its newest if no ``checkpoint_id``), or None.

        Its ``pending_writes`` come in LangGraph's ``writes_sort_key`` order
        (task_path, task_id, idx).
        """
        return reading.get_tuple(self.store, self.serde, config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of ``config``'s thread (all threads if None).

        ``config`` narrows to its ``checkpoint_ns`` and ``checkpoint_id`` when it
        has them; ``filter`` keeps checkpoints whose metadata equals every given
        key/value; ``before`` keeps checkpoints older than its ``checkpoint_id``;
        ``limit`` caps the count.
        """
        for row in reading.select(self.store, config, filter, before, limit):
            yield reading.to_tuple(self.store, self.serde, row)

    # -- writing (writing.py) --------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` as a child of ``config``'s checkpoint; one committed row.

        The checkpoint is encoded (serde) and the metadata turned to JSON
        before the write transaction opens, so the transaction is one INSERT.
        Raises EncodeError (nothing written) for metadata that is not JSON.
        """
        return writing.put(self.store, self.serde, config, checkpoint, metadata)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes on ``config``'s checkpoint, all in one transaction.

        A write is keyed by (task, index): storing the same task's writes again
        keeps the first copy, except the special channels (error, interrupt,
        resume, scheduled), whose latest value replaces the previous one.
        """
        writing.put_writes(self.store, self.serde, config, writes, task_id, task_path)

    # -- whole threads (threads.py) --------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of ``thread_id`` (all namespaces); atomic.

        The thread's ``durable_node`` runs in this file go in the same
        transaction: a thread made again under this id (``copy_thread`` of
        the same template reproduces its checkpoint ids) starts afresh.
        """
        threads.delete_thread(self.store, thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose ``metadata.run_id`` is in ``run_ids``, and their writes.

        Atomic. Deleting a run whose checkpoints a later run of the same
        thread builds on leaves that thread's history with a gap (LangGraph's
        own warning for ``DeltaChannel``). The ``durable_node`` runs recorded
        under those run ids (``config["metadata"]["run_id"]``) are retired too.
        """
        threads.delete_for_runs(self.store, run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another, ids and order kept; atomic.

        Rows the target already has under the same ids are replaced; a source
        with no checkpoints copies nothing. The target's ``durable_node`` runs
        that started from a checkpoint the copy brings in are retired: the
        copy is a new execution from there, not the target's earlier one.
        """
        threads.copy_thread(self.store, source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune the given threads: ``"keep_latest"`` keeps the newest checkpoint of each
        namespace (and its writes), ``"delete"`` removes everything. Atomic.

        Raises ValueError for another strategy. ``keep_latest`` drops the
        history that ``get_state_history`` and time travel read; LangGraph's
        beta ``DeltaChannel`` needs that history and must not be pruned this way.

        ``durable_node`` runs go with what they belonged to: all of a deleted
        thread's, and with ``keep_latest`` those of supersteps the kept
        checkpoint already contains (its step or earlier, in its namespace);
        a node paused or interrupted after it keeps its run.
        """
        threads.prune(self.store, thread_ids, strategy)

    # -- async twins: the sync method in a worker thread -----------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``get_tuple`` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``list`` in worker threads: one query, then tuples decoded in batches."""
        rows = await asyncio.to_thread(reading.select, self.store, config, filter, before, limit)
        for start in range(0, len(rows), _ALIST_BATCH):
            batch = rows[start : start + _ALIST_BATCH]
            tuples = await asyncio.to_thread(reading.to_tuples, self.store, self.serde, batch)
            for tup in tuples:
                yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``put`` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``put_writes`` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """``delete_thread`` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """``delete_for_runs`` in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """``copy_thread`` in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``prune`` in a worker thread."""
        await asyncio.to_thread(functools.partial(self.prune, thread_ids, strategy=strategy))
