"""LangGraph checkpoints in the letitloop journal file, and nodes whose inner calls are steps.

Install with ``pip install 'letitloop[langgraph]'``; the core package never
imports this module.

``LetItLoopCheckpointSaver`` is a LangGraph ``BaseCheckpointSaver``: every
sync method and its ``a*`` twin (``get_tuple``, ``list``, ``put``,
``put_writes``, ``delete_thread``, ``delete_for_runs``, ``copy_thread``,
``prune``). Checkpoints and pending writes are rows of the tables
``langgraph_checkpoints`` and ``langgraph_writes`` (migration 0002) in the same
journal file as the steps: ids and metadata as text, the payload exactly as
the saver's serde gives it.

``durable_node`` journals the ``step()`` calls inside a node, keyed by the
thread and the node's task, so a node killed half-way replays its finished
calls and runs only the interrupted one again.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import hashlib
import inspect
import json
import os
import random
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, TypeVar, cast, overload

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        PendingWrite,
        get_checkpoint_id,
        get_serializable_checkpoint_metadata,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
    from langgraph.config import get_config
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f"letitloop.adapters.langgraph needs LangGraph, which is not installed ({exc}); "
        f"install it with: pip install 'letitloop[langgraph]'"
    ) from exc

from ..codec import CodecRegistry
from ..errors import DecodeError, EncodeError, LetItLoopError
from ..journal import DEFAULT_TIMEOUT, Journal
from ..store import MAX_NAME_LENGTH, Durability, Store

__all__ = ["LetItLoopCheckpointSaver", "durable_node", "node_run_key"]

P = ParamSpec("P")
R = TypeVar("R")

#: The key under which LangGraph puts the graph's checkpointer in a node's
#: config (``langgraph._internal._constants.CONFIG_KEY_CHECKPOINTER``); read
#: with ``.get`` so a rename upstream only loses the "same file" default.
_CONFIG_KEY_CHECKPOINTER = "__pregel_checkpointer"

#: How many listed checkpoints ``alist`` decodes per trip to the worker thread:
#: large enough that thread hand-offs cost little, small enough that the first
#: tuples arrive before a long history is decoded.
_ALIST_BATCH = 64

_CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"
)
_SCALARS = (str, int, float, bool)
#: Metadata keys that a JSON path quotes without surprises; other keys (quotes,
#: backslashes, non-ASCII) are filtered in Python instead of with json_extract.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.\- ]+")

_Row = tuple[str, str, str, "str | None", str, bytes, str]


def _metadata_text(metadata: CheckpointMetadata, where: str) -> str:
    """Metadata as JSON text (readable in a SQLite browser, filterable with json_extract)."""
    try:
        return json.dumps(metadata, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise EncodeError(
            f"{where}: checkpoint metadata must be JSON (str, int, float, bool, None, "
            f"lists and dicts), found {exc}; keep non-JSON values in the graph state, "
            f"not in config['metadata']",
            path="$.metadata",
        ) from None


class LetItLoopCheckpointSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that keeps its checkpoints in the letitloop journal file.

    ``LetItLoopCheckpointSaver()`` uses the same journal file as ``Journal``:
    ``path=`` if given, else ``$LETITLOOP_DB``, else ``.letitloop/journal.db``.
    Any number of savers, threads and processes may share one file: every
    write is one short ``BEGIN IMMEDIATE`` transaction and a writer waits for
    another's lock (busy timeout) instead of failing with "database is locked".

    ``durability`` is the journal's: ``"process"`` (default) survives the death
    of the process, ``"power"`` also a power loss (an fsync per commit).

    ``serde`` defaults to LangGraph's ``JsonPlusSerializer`` (msgpack, no
    pickle). Set ``LANGGRAPH_STRICT_MSGPACK=true`` or pass
    ``JsonPlusSerializer(allowed_msgpack_modules=[...])`` to rebuild only
    allow-listed types; pickle is used only if you pass a serde built with
    ``pickle_fallback=True``.

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
    ) -> None:
        super().__init__(serde=serde)
        self.store = Store(path, durability=durability)

    # -- lifetime --------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The journal file."""
        return self.store.path

    def close(self) -> None:
        """Close the connection to the journal file. Every write was already committed."""
        self.store.close()

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

    # -- versions --------------------------------------------------------------

    def get_next_version(self, current: str | int | None, channel: None) -> str:
        """The next channel version: ``<32-digit counter>.<random>``, as LangGraph's savers do.

        The same format as ``SqliteSaver`` and ``InMemorySaver`` use, so a thread
        moved between savers keeps comparable versions.
        """
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # -- reading ---------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (its newest if no ``checkpoint_id``), or None.

        Its ``pending_writes`` come in LangGraph's ``writes_sort_key`` order
        (task_path, task_id, idx).
        """
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns") or "")
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            rows = self.store.query(
                f"SELECT {_CHECKPOINT_COLUMNS} FROM langgraph_checkpoints "
                f"WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (thread_id, ns, checkpoint_id),
            )
        else:
            rows = self.store.query(
                f"SELECT {_CHECKPOINT_COLUMNS} FROM langgraph_checkpoints "
                f"WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
                (thread_id, ns),
            )
        if not rows:
            return None
        return self._tuple(rows[0])

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
        for row in self._select(config, filter, before, limit):
            yield self._tuple(row)

    def _select(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> builtins.list[_Row]:
        if limit is not None and limit <= 0:
            return []
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        if config is not None:
            conf = config["configurable"]
            if conf.get("thread_id") is not None:
                where.append("thread_id = ?")
                params.append(str(conf["thread_id"]))
            if conf.get("checkpoint_ns") is not None:
                where.append("checkpoint_ns = ?")
                params.append(str(conf["checkpoint_ns"]))
            if checkpoint_id := get_checkpoint_id(config):
                where.append("checkpoint_id = ?")
                params.append(checkpoint_id)
        if before is not None and (before_id := get_checkpoint_id(before)):
            where.append("checkpoint_id < ?")
            params.append(before_id)
        # Scalars are compared in SQL (json_extract on the metadata text);
        # lists, dicts and odd keys are compared in Python after decoding, so
        # that equality means what it means in Python (dict key order aside).
        in_python: dict[str, Any] = {}
        for key, value in (filter or {}).items():
            if not _PLAIN_KEY.fullmatch(key) or not (value is None or isinstance(value, _SCALARS)):
                in_python[key] = value
            elif value is None:
                where.append("json_extract(metadata, ?) IS NULL")
                params.append(f'$."{key}"')
            else:
                where.append("json_extract(metadata, ?) = ?")
                params.extend((f'$."{key}"', value))
        sql = f"SELECT {_CHECKPOINT_COLUMNS} FROM langgraph_checkpoints"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY checkpoint_id DESC"
        if limit is not None and not in_python:
            sql += " LIMIT ?"
            params.append(limit)
        rows = cast(builtins.list[_Row], self.store.query(sql, params))
        if in_python:
            rows = [
                r for r in rows if all(json.loads(r[6]).get(k) == v for k, v in in_python.items())
            ]
            if limit is not None:
                rows = rows[:limit]
        return rows

    def _tuples(self, rows: Sequence[_Row]) -> builtins.list[CheckpointTuple]:
        return [self._tuple(r) for r in rows]

    def _tuple(self, row: _Row) -> CheckpointTuple:
        thread_id, ns, checkpoint_id, parent_id, type_, blob, metadata = row
        writes = self.store.query(
            "SELECT task_id, channel, type, value FROM langgraph_writes "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? "
            "ORDER BY task_path, task_id, idx",
            (thread_id, ns, checkpoint_id),
        )
        where = f"thread {thread_id!r} checkpoint {checkpoint_id}"
        pending: builtins.list[PendingWrite] = [
            (task_id, channel, self._load(wtype, value, f"{where} write {task_id}/{channel}"))
            for task_id, channel, wtype, value in writes
        ]
        return CheckpointTuple(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            },
            checkpoint=self._load(type_, blob, where),
            metadata=cast(CheckpointMetadata, json.loads(metadata)),
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": parent_id,
                    }
                }
                if parent_id
                else None
            ),
            pending_writes=pending,
        )

    def _load(self, type_: str, data: bytes, where: str) -> Any:
        try:
            return self.serde.loads_typed((type_, data))
        except NotImplementedError:
            # The serde refuses a type tag it was not configured for; 'pickle'
            # in particular is only read by a serde built with pickle_fallback=True.
            raise DecodeError(
                f"{self.store.path}: {where} is stored as {type_!r}, which this saver's "
                f"serde ({type(self.serde).__name__}) does not read; if you wrote it with "
                f"another serde and trust this file, pass that serde to "
                f"LetItLoopCheckpointSaver(serde=...)"
            ) from None

    # -- writing ---------------------------------------------------------------

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
        conf = config["configurable"]
        thread_id = conf["thread_id"]
        ns = str(conf.get("checkpoint_ns") or "")
        md = get_serializable_checkpoint_metadata(config, metadata)
        md_text = _metadata_text(md, f"thread {thread_id!r} checkpoint {checkpoint['id']}")
        type_, blob = self.serde.dumps_typed(checkpoint)
        run_id = md.get("run_id")
        step = md.get("step")
        self.store.write1(
            "INSERT OR REPLACE INTO langgraph_checkpoints (thread_id, checkpoint_ns, "
            "checkpoint_id, parent_checkpoint_id, run_id, source, step, ts, type, checkpoint, "
            "metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                str(thread_id),
                ns,
                checkpoint["id"],
                conf.get("checkpoint_id"),
                None if run_id is None else str(run_id),
                md.get("source"),
                step if isinstance(step, int) else None,
                checkpoint.get("ts"),
                type_,
                blob,
                md_text,
            ),
        )
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

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
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns") or "")
        checkpoint_id = str(conf["checkpoint_id"])
        rows = [
            (
                thread_id,
                ns,
                checkpoint_id,
                task_id,
                task_path,
                WRITES_IDX_MAP.get(channel, idx),
                channel,
                *self.serde.dumps_typed(value),
            )
            for idx, (channel, value) in enumerate(writes)
        ]
        if not rows:
            return
        verb = (
            "INSERT OR REPLACE"
            if all(channel in WRITES_IDX_MAP for channel, _ in writes)
            else "INSERT OR IGNORE"
        )
        with self.store.write() as c:
            c.executemany(
                f"{verb} INTO langgraph_writes (thread_id, checkpoint_ns, checkpoint_id, "
                f"task_id, task_path, idx, channel, type, value) "
                f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of ``thread_id`` (all namespaces); atomic."""
        tid = str(thread_id)
        with self.store.write() as c:
            c.execute("DELETE FROM langgraph_writes WHERE thread_id = ?", (tid,))
            c.execute("DELETE FROM langgraph_checkpoints WHERE thread_id = ?", (tid,))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose ``metadata.run_id`` is in ``run_ids``, and their writes.

        Atomic. Deleting a run whose checkpoints a later run of the same
        thread builds on leaves that thread's history with a gap (LangGraph's
        own warning for ``DeltaChannel``).
        """
        ids = [str(r) for r in run_ids]
        if not ids:
            return
        with self.store.write() as c:
            # 500 ids per statement stays far below SQLite's bound-variable limit.
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                c.execute(
                    "DELETE FROM langgraph_writes WHERE (thread_id, checkpoint_ns, checkpoint_id) "
                    "IN (SELECT thread_id, checkpoint_ns, checkpoint_id FROM "
                    f"langgraph_checkpoints WHERE run_id IN ({marks}))",
                    chunk,
                )
                c.execute(f"DELETE FROM langgraph_checkpoints WHERE run_id IN ({marks})", chunk)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of one thread to another, ids and order kept; atomic.

        Rows the target already has under the same ids are replaced; a source
        with no checkpoints copies nothing.
        """
        src, dst = str(source_thread_id), str(target_thread_id)
        if src == dst:
            return
        with self.store.write() as c:
            c.execute(
                "INSERT OR REPLACE INTO langgraph_checkpoints (thread_id, checkpoint_ns, "
                "checkpoint_id, parent_checkpoint_id, run_id, source, step, ts, type, "
                "checkpoint, metadata) SELECT ?, checkpoint_ns, checkpoint_id, "
                "parent_checkpoint_id, run_id, source, step, ts, type, checkpoint, metadata "
                "FROM langgraph_checkpoints WHERE thread_id = ?",
                (dst, src),
            )
            c.execute(
                "INSERT OR REPLACE INTO langgraph_writes (thread_id, checkpoint_ns, "
                "checkpoint_id, task_id, task_path, idx, channel, type, value) SELECT ?, "
                "checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value "
                "FROM langgraph_writes WHERE thread_id = ?",
                (dst, src),
            )

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune the given threads: ``"keep_latest"`` keeps the newest checkpoint of each
        namespace (and its writes), ``"delete"`` removes everything. Atomic.

        Raises ValueError for another strategy. ``keep_latest`` drops the
        history that ``get_state_history`` and time travel read; LangGraph's
        beta ``DeltaChannel`` needs that history and must not be pruned this way.
        """
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"prune strategy must be 'keep_latest' or 'delete', got {strategy!r}")
        ids = [str(t) for t in thread_ids]
        if not ids:
            return
        with self.store.write() as c:
            for tid in ids:
                if strategy == "delete":
                    c.execute("DELETE FROM langgraph_writes WHERE thread_id = ?", (tid,))
                    c.execute("DELETE FROM langgraph_checkpoints WHERE thread_id = ?", (tid,))
                    continue
                # Named, not ?1: Python 3.12 deprecates numbered placeholders
                # bound from a sequence, and 3.14 refuses them.
                latest = (
                    "SELECT checkpoint_ns, MAX(checkpoint_id) FROM langgraph_checkpoints "
                    "WHERE thread_id = :tid GROUP BY checkpoint_ns"
                )
                c.execute(
                    "DELETE FROM langgraph_writes WHERE thread_id = :tid AND "
                    f"(checkpoint_ns, checkpoint_id) NOT IN ({latest})",
                    {"tid": tid},
                )
                c.execute(
                    "DELETE FROM langgraph_checkpoints WHERE thread_id = :tid AND "
                    f"(checkpoint_ns, checkpoint_id) NOT IN ({latest})",
                    {"tid": tid},
                )

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
        rows = await asyncio.to_thread(self._select, config, filter, before, limit)
        for start in range(0, len(rows), _ALIST_BATCH):
            batch = rows[start : start + _ALIST_BATCH]
            tuples = await asyncio.to_thread(self._tuples, batch)
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


# -- durable nodes ---------------------------------------------------------------


def _bounded(name: str) -> str:
    """``name`` if it fits a run/goal name, else a prefix plus a hash of the whole."""
    if len(name) <= MAX_NAME_LENGTH:
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:32]
    return f"{name[: MAX_NAME_LENGTH - 40]}…{digest}"


def node_run_key(config: RunnableConfig) -> tuple[str, str]:
    """The ``(goal, run)`` under which ``durable_node`` journals one execution of a node.

    goal: ``langgraph:<node name>`` — one journal table per node, however many
    threads. run: ``<thread_id>|<checkpoint_ns>``, where LangGraph's
    ``checkpoint_ns`` inside a node is ``<node>:<task_id>`` (prefixed by the
    parent graph's namespace in a subgraph). LangGraph derives ``task_id``
    from the checkpoint the superstep starts from, the step number, the node
    and its triggers. So:

    - a resume after a crash (``invoke(None, config)``), a retry
      (``RetryPolicy``) or a resume after ``interrupt()`` re-runs the *same*
      task: same run, its finished steps replay;
    - the same node in a later superstep or a later turn of the thread starts
      from a newer checkpoint: a new task id, a new run, nothing stale replays.

    Raises LetItLoopError when the config has no ``thread_id`` or is not a
    node's config (no ``checkpoint_ns`` with a task id).
    """
    conf = config.get("configurable") or {}
    meta = config.get("metadata") or {}
    thread_id = conf.get("thread_id")
    ns = conf.get("checkpoint_ns") or meta.get("langgraph_checkpoint_ns") or ""
    if thread_id is None or ":" not in str(ns):
        raise LetItLoopError(
            f"durable_node expected a LangGraph node's config with a thread_id and a task "
            f"namespace, found thread_id={thread_id!r}, checkpoint_ns={ns!r}; compile the "
            f"graph with a checkpointer and invoke it with "
            f"config={{'configurable': {{'thread_id': ...}}}}"
        )
    node = meta.get("langgraph_node") or str(ns).rsplit("|", 1)[-1].split(":", 1)[0]
    return _bounded(f"langgraph:{node}"), _bounded(f"{thread_id}|{ns}")


def _with_config(signature: inspect.Signature) -> inspect.Signature:
    """``signature`` plus a keyword-only ``config``: LangGraph passes the run's config to it."""
    params = list(signature.parameters.values())
    at = next(
        (i for i, p in enumerate(params) if p.kind is inspect.Parameter.VAR_KEYWORD), len(params)
    )
    params.insert(at, inspect.Parameter("config", inspect.Parameter.KEYWORD_ONLY, default=None))
    return signature.replace(parameters=params)


@overload
def durable_node(fn: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def durable_node(
    *,
    goal: str | None = None,
    path: str | os.PathLike[str] | None = None,
    durability: Durability | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    registry: CodecRegistry | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def durable_node(
    fn: Callable[P, R] | None = None,
    /,
    *,
    goal: str | None = None,
    path: str | os.PathLike[str] | None = None,
    durability: Durability | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    registry: CodecRegistry | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Run a LangGraph node inside a journal, so ``step()`` calls in it are journaled.

    ``@durable_node`` (or ``@durable_node(...)``) on a node function opens
    ``Journal(goal, run=...)`` keyed by :func:`node_run_key` around each call:
    inside, ``letitloop.step(name, fn, ...)`` records each expensive call.
    A node killed half-way, on resume, replays the calls that returned and
    runs the interrupted one again; the node's own code outside steps runs
    again (keep side effects in steps).

    The journal file is the graph's checkpointer's when that is a
    ``LetItLoopCheckpointSaver`` (and ``path`` is not given), else ``path`` /
    ``$LETITLOOP_DB`` / ``.letitloop/journal.db``. ``goal`` replaces the
    default ``langgraph:<node>``. Two processes running the same task at once
    (two workers resuming one thread) are serialized by the journal's run
    lock: the second waits up to ``timeout`` seconds, then raises
    RunHeldError. An ``async def`` node is opened with ``async with`` and
    journals its calls with ``await async_step(...)``. Raises LetItLoopError
    when called outside a graph run that has a thread_id.
    """

    def decorate(node_fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(node_fn)
        wants_config = "config" in signature.parameters

        def journal_for_this_call(config: Any) -> Journal:
            if config is None:
                try:
                    config = get_config()
                except RuntimeError:
                    raise LetItLoopError(
                        f"durable_node {node_fn.__qualname__} was called outside a LangGraph "
                        f"run (no RunnableConfig in context); add it to a graph with "
                        f"add_node() and invoke the graph"
                    ) from None
            default_goal, run = node_run_key(config)
            journal_path = path
            journal_durability = durability
            saver = (config.get("configurable") or {}).get(_CONFIG_KEY_CHECKPOINTER)
            if journal_path is None and isinstance(saver, LetItLoopCheckpointSaver):
                journal_path = saver.store.path
                if journal_durability is None:
                    journal_durability = saver.store.durability
            return Journal(
                goal or default_goal,
                run=run,
                path=journal_path,
                durability=journal_durability or "process",
                timeout=timeout,
                registry=registry,
            )

        def config_of(kwargs: dict[str, Any]) -> Any:
            # LangGraph passes config= to a node whose signature names it (see
            # below): the way to reach it in an async node on Python 3.10, where
            # tasks do not inherit the context that get_config() reads.
            return kwargs.get("config") if wants_config else kwargs.pop("config", None)

        if inspect.iscoroutinefunction(node_fn):

            @functools.wraps(node_fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                async with journal_for_this_call(config_of(kwargs)):
                    return await node_fn(*args, **kwargs)

            wrapped: Callable[..., Any] = async_wrapper
        else:

            @functools.wraps(node_fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with journal_for_this_call(config_of(kwargs)):
                    return node_fn(*args, **kwargs)

            wrapped = wrapper
        if not wants_config:
            wrapped.__signature__ = _with_config(signature)  # type: ignore[attr-defined]
        return cast(Callable[P, R], wrapped)

    if fn is not None:
        return decorate(fn)
    return decorate
