"""``LetItLoopCheckpointSaver``: LangGraph's checkpoints and writes as rows of the journal file.

Every sync method of ``BaseCheckpointSaver`` and its ``a*`` twin
(``get_tuple``, ``list``, ``put``, ``put_writes``, ``delete_thread``,
``delete_for_runs``, ``copy_thread``, ``prune``). Checkpoints and pending
writes are rows of the tables ``langgraph_checkpoints`` and
``langgraph_writes`` (the adapter's own migration set, ``tables.py``) in the
same journal file as the steps: ids and metadata as text, the payload
exactly as the saver's serde gives it.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import json
import os
import random
import re
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, cast

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

from ...errors import DecodeError, EncodeError, InvalidNameError
from ...store import Durability, Store
from . import polled, retire, tables
from .serde import AllowedType, strict_serde

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


def _thread(value: Any) -> str:
    """A thread id as the text stored in the file; InvalidNameError if SQLite cannot store it.

    Any text is a thread id (newlines, escapes, separators), except text
    with a lone surrogate (what ``os.fsdecode`` makes of bytes that are not
    UTF-8), which has no UTF-8 form.
    """
    text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidNameError(
            f"thread_id {text!r} is not valid Unicode text (it holds a lone surrogate, which "
            f"SQLite cannot store as UTF-8); decode the bytes it came from with an explicit "
            f"encoding, or use another thread_id"
        ) from None
    return text


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
    another's lock, in short polls up to 30 s (``polled.py``), instead of
    failing with "database is locked".

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
    ) -> None:
        allowed = tuple(allowed_types)
        if serde is not None and allowed:
            raise ValueError(
                "pass allowed_types= or serde=, not both: allowed_types widens the default "
                "strict serde; give your own serde its allow-list yourself"
            )
        super().__init__(serde=serde if serde is not None else strict_serde(allowed))
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
        thread_id = _thread(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns") or "")
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            rows = polled.query(
                self.store,
                f"SELECT {_CHECKPOINT_COLUMNS} FROM langgraph_checkpoints "
                f"WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                (thread_id, ns, checkpoint_id),
            )
        else:
            rows = polled.query(
                self.store,
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
                params.append(_thread(conf["thread_id"]))
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
        rows = cast(builtins.list[_Row], polled.query(self.store, sql, params))
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
        writes = polled.query(
            self.store,
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
        thread_id = _thread(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns") or "")
        md = get_serializable_checkpoint_metadata(config, metadata)
        md_text = _metadata_text(md, f"thread {thread_id!r} checkpoint {checkpoint['id']}")
        type_, blob = self.serde.dumps_typed(checkpoint)
        run_id = md.get("run_id")
        step = md.get("step")
        row = (
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
        )
        polled.commit(
            self.store,
            "INSERT OR REPLACE INTO langgraph_checkpoints (thread_id, checkpoint_ns, "
            "checkpoint_id, parent_checkpoint_id, run_id, source, step, ts, type, "
            "checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row,),
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
        thread_id = _thread(conf["thread_id"])
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
        polled.commit(
            self.store,
            f"{verb} INTO langgraph_writes (thread_id, checkpoint_ns, checkpoint_id, "
            f"task_id, task_path, idx, channel, type, value) "
            f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of ``thread_id`` (all namespaces); atomic.

        The thread's ``durable_node`` runs in this file go in the same
        transaction: a thread made again under this id (``copy_thread`` of
        the same template reproduces its checkpoint ids) starts afresh.
        """
        tid = _thread(thread_id)
        with polled.transaction(self.store) as c:
            c.execute("DELETE FROM langgraph_writes WHERE thread_id = ?", (tid,))
            c.execute("DELETE FROM langgraph_checkpoints WHERE thread_id = ?", (tid,))
            retire.retire_thread(self.store, c, tid)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose ``metadata.run_id`` is in ``run_ids``, and their writes.

        Atomic. Deleting a run whose checkpoints a later run of the same
        thread builds on leaves that thread's history with a gap (LangGraph's
        own warning for ``DeltaChannel``). The ``durable_node`` runs recorded
        under those run ids (``config["metadata"]["run_id"]``) are retired too.
        """
        ids = [str(r) for r in run_ids]
        if not ids:
            return
        with polled.transaction(self.store) as c:
            retire.retire(self.store, c, retire.runs_of_langgraph_runs(c, ids))
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
        with no checkpoints copies nothing. The target's ``durable_node`` runs
        that started from a checkpoint the copy brings in are retired: the
        copy is a new execution from there, not the target's earlier one.
        """
        src, dst = _thread(source_thread_id), _thread(target_thread_id)
        if src == dst:
            return
        with polled.transaction(self.store) as c:
            copied = {
                row[0]
                for row in c.execute(
                    "SELECT checkpoint_id FROM langgraph_checkpoints WHERE thread_id = ?", (src,)
                )
            }
            retire.retire_where(
                self.store, c, dst, lambda recorded: recorded.get("checkpoint") not in copied
            )
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

        ``durable_node`` runs go with what they belonged to: all of a deleted
        thread's, and with ``keep_latest`` those of supersteps the kept
        checkpoint already contains (its step or earlier, in its namespace);
        a node paused or interrupted after it keeps its run.
        """
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"prune strategy must be 'keep_latest' or 'delete', got {strategy!r}")
        ids = [_thread(t) for t in thread_ids]
        if not ids:
            return
        with polled.transaction(self.store) as c:
            for tid in ids:
                if strategy == "delete":
                    c.execute("DELETE FROM langgraph_writes WHERE thread_id = ?", (tid,))
                    c.execute("DELETE FROM langgraph_checkpoints WHERE thread_id = ?", (tid,))
                    retire.retire_thread(self.store, c, tid)
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
                kept: dict[str, int] = {}
                for ns, step in c.execute(
                    "SELECT checkpoint_ns, step FROM langgraph_checkpoints WHERE thread_id = ?",
                    (tid,),
                ):
                    if step is not None:
                        kept[ns] = max(int(step), kept.get(ns, int(step)))

                def after_kept(recorded: dict[str, Any], kept: dict[str, int] = kept) -> bool:
                    latest_step = kept.get(str(recorded.get("ns", "")))
                    step = recorded.get("step")
                    return latest_step is None or not isinstance(step, int) or step > latest_step

                retire.retire_where(self.store, c, tid, after_kept)

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
