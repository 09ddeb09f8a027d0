"""Writing checkpoints: ``put``'s one row, ``put_writes``' rows of a task, and channel versions.

Everything is encoded (serde, metadata as JSON text) before the write
starts, so each write is one statement through ``polled.commit``, its own
transaction.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...errors import EncodeError
from ...stores.sqlite.store import Store
from . import polled
from .configs import checkpoint_config, thread_text


def next_version(current: str | int | None) -> str:
    """The next channel version: ``<32-digit counter>.<random>``, as LangGraph's savers do."""
    if current is None:
        current_v = 0
    elif isinstance(current, int):
        current_v = current
    else:
        current_v = int(current.split(".")[0])
    return f"{current_v + 1:032}.{random.random():016}"


def metadata_text(metadata: CheckpointMetadata, where: str) -> str:
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


def put(
    store: Store,
    serde: SerializerProtocol,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
) -> RunnableConfig:
    """Store ``checkpoint`` as a child of ``config``'s checkpoint: one committed row."""
    conf = config["configurable"]
    thread_id = thread_text(conf["thread_id"])
    ns = str(conf.get("checkpoint_ns") or "")
    md = get_serializable_checkpoint_metadata(config, metadata)
    md_text = metadata_text(md, f"thread {thread_id!r} checkpoint {checkpoint['id']}")
    type_, blob = serde.dumps_typed(checkpoint)
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
        store,
        "INSERT OR REPLACE INTO langgraph_checkpoints (thread_id, checkpoint_ns, "
        "checkpoint_id, parent_checkpoint_id, run_id, source, step, ts, type, "
        "checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (row,),
    )
    return checkpoint_config(thread_id, ns, checkpoint["id"])


def put_writes(
    store: Store,
    serde: SerializerProtocol,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> None:
    """Store a task's writes in one transaction (``LetItLoopCheckpointSaver.put_writes``)."""
    conf = config["configurable"]
    thread_id = thread_text(conf["thread_id"])
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
            *serde.dumps_typed(value),
        )
        for idx, (channel, value) in enumerate(writes)
    ]
    if not rows:
        return
    # The special channels (error, interrupt, resume, scheduled) keep their
    # latest value; a task's other writes keep their first copy.
    verb = (
        "INSERT OR REPLACE"
        if all(channel in WRITES_IDX_MAP for channel, _ in writes)
        else "INSERT OR IGNORE"
    )
    polled.commit(
        store,
        f"{verb} INTO langgraph_writes (thread_id, checkpoint_ns, checkpoint_id, "
        f"task_id, task_path, idx, channel, type, value) "
        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
