"""Reading checkpoints: the SELECTs behind ``get_tuple`` and ``list``, and rows back into tuples.

A row is rebuilt into a ``CheckpointTuple`` with its pending writes in
LangGraph's ``writes_sort_key`` order; a payload is decoded by the saver's
serde, and a type tag that serde refuses is a ``DecodeError`` naming the
file, the checkpoint and the serde.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...errors import DecodeError
from ...stores.sqlite.store import Store
from . import polled
from .configs import checkpoint_config, thread_text

_CHECKPOINT_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata"
)
_SCALARS = (str, int, float, bool)
#: Metadata keys that a JSON path quotes without surprises; other keys (quotes,
#: backslashes, non-ASCII) are filtered in Python instead of with json_extract.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.\- ]+")

#: One row of ``langgraph_checkpoints``, in ``_CHECKPOINT_COLUMNS``' order.
Row = tuple[str, str, str, "str | None", str, bytes, str]


def get_tuple(
    store: Store, serde: SerializerProtocol, config: RunnableConfig
) -> CheckpointTuple | None:
    """The checkpoint named by ``config`` (its newest if no ``checkpoint_id``), or None."""
    conf = config["configurable"]
    thread_id = thread_text(conf["thread_id"])
    ns = str(conf.get("checkpoint_ns") or "")
    checkpoint_id = get_checkpoint_id(config)
    if checkpoint_id:
        rows = polled.query(
            store,
            f"SELECT {_CHECKPOINT_COLUMNS} FROM langgraph_checkpoints "
            f"WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (thread_id, ns, checkpoint_id),
        )
    else:
        rows = polled.query(
            store,
            f"SELECT {_CHECKPOINT_COLUMNS} FROM langgraph_checkpoints "
            f"WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id DESC LIMIT 1",
            (thread_id, ns),
        )
    if not rows:
        return None
    return to_tuple(store, serde, rows[0])


def select(
    store: Store,
    config: RunnableConfig | None,
    filter: dict[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> list[Row]:
    """The rows ``list`` yields, newest first (see ``LetItLoopCheckpointSaver.list``)."""
    if limit is not None and limit <= 0:
        return []
    where: list[str] = []
    params: list[Any] = []
    if config is not None:
        conf = config["configurable"]
        if conf.get("thread_id") is not None:
            where.append("thread_id = ?")
            params.append(thread_text(conf["thread_id"]))
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
    rows = cast(list[Row], polled.query(store, sql, params))
    if in_python:
        rows = [r for r in rows if all(json.loads(r[6]).get(k) == v for k, v in in_python.items())]
        if limit is not None:
            rows = rows[:limit]
    return rows


def to_tuples(
    store: Store, serde: SerializerProtocol, rows: Sequence[Row]
) -> list[CheckpointTuple]:
    """``to_tuple`` of each row, in order (one batch of ``alist``)."""
    return [to_tuple(store, serde, r) for r in rows]


def to_tuple(store: Store, serde: SerializerProtocol, row: Row) -> CheckpointTuple:
    """One checkpoint row, decoded, with its pending writes (task_path, task_id, idx order)."""
    thread_id, ns, checkpoint_id, parent_id, type_, blob, metadata = row
    writes = polled.query(
        store,
        "SELECT task_id, channel, type, value FROM langgraph_writes "
        "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ? "
        "ORDER BY task_path, task_id, idx",
        (thread_id, ns, checkpoint_id),
    )
    where = f"thread {thread_id!r} checkpoint {checkpoint_id}"
    pending: list[PendingWrite] = [
        (task_id, channel, load(store, serde, wtype, value, f"{where} write {task_id}/{channel}"))
        for task_id, channel, wtype, value in writes
    ]
    return CheckpointTuple(
        config=checkpoint_config(thread_id, ns, checkpoint_id),
        checkpoint=load(store, serde, type_, blob, where),
        metadata=cast(CheckpointMetadata, json.loads(metadata)),
        parent_config=checkpoint_config(thread_id, ns, parent_id) if parent_id else None,
        pending_writes=pending,
    )


def load(store: Store, serde: SerializerProtocol, type_: str, data: bytes, where: str) -> Any:
    """A payload decoded by ``serde``; DecodeError if ``serde`` refuses its type tag."""
    try:
        return serde.loads_typed((type_, data))
    except NotImplementedError:
        # The serde refuses a type tag it was not configured for; 'pickle'
        # in particular is only read by a serde built with pickle_fallback=True.
        raise DecodeError(
            f"{store.path}: {where} is stored as {type_!r}, which this saver's "
            f"serde ({type(serde).__name__}) does not read; if you wrote it with "
            f"another serde and trust this file, pass that serde to "
            f"LetItLoopCheckpointSaver(serde=...)"
        ) from None
