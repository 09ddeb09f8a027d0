"""Changing whole threads: deleting a thread or LangGraph runs, copying a thread, pruning history.

Each function is one write transaction that also retires, through
``retire.py``, the ``durable_node`` runs the change makes unreachable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...stores.sqlite.store import Store
from . import polled, retire
from .configs import thread_text


def delete_thread(store: Store, thread_id: str) -> None:
    """Delete a thread's checkpoints, writes and node runs (``LetItLoopCheckpointSaver``'s)."""
    tid = thread_text(thread_id)
    with polled.transaction(store) as c:
        c.execute("DELETE FROM langgraph_writes WHERE thread_id = ?", (tid,))
        c.execute("DELETE FROM langgraph_checkpoints WHERE thread_id = ?", (tid,))
        c.execute("DELETE FROM langgraph_requests WHERE thread_id = ?", (tid,))
        c.execute("DELETE FROM langgraph_request_inputs WHERE thread_id = ?", (tid,))
        retire.retire_thread(store, c, tid)


def delete_for_runs(store: Store, run_ids: Sequence[str]) -> None:
    """Delete the checkpoints, writes and node runs of LangGraph runs, in one transaction."""
    ids = [str(r) for r in run_ids]
    if not ids:
        return
    with polled.transaction(store) as c:
        retire.retire(store, c, retire.runs_of_langgraph_runs(c, ids))
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


def copy_thread(store: Store, source_thread_id: str, target_thread_id: str) -> None:
    """Copy a thread's checkpoints and writes over another, retiring the target's node runs
    that started from a checkpoint the copy brings in; one transaction."""
    src, dst = thread_text(source_thread_id), thread_text(target_thread_id)
    if src == dst:
        return
    with polled.transaction(store) as c:
        copied = {
            row[0]
            for row in c.execute(
                "SELECT checkpoint_id FROM langgraph_checkpoints WHERE thread_id = ?", (src,)
            )
        }
        retire.retire_where(
            store, c, dst, lambda recorded: recorded.get("checkpoint") not in copied
        )
        # The target's requests answered from checkpoints the copy replaces.
        c.execute("DELETE FROM langgraph_requests WHERE thread_id = ?", (dst,))
        c.execute("DELETE FROM langgraph_request_inputs WHERE thread_id = ?", (dst,))
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


def prune(store: Store, thread_ids: Sequence[str], strategy: str) -> None:
    """Prune threads (``"keep_latest"`` or ``"delete"``) in one transaction; else ValueError."""
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"prune strategy must be 'keep_latest' or 'delete', got {strategy!r}")
    ids = [thread_text(t) for t in thread_ids]
    if not ids:
        return
    with polled.transaction(store) as c:
        for tid in ids:
            if strategy == "delete":
                c.execute("DELETE FROM langgraph_writes WHERE thread_id = ?", (tid,))
                c.execute("DELETE FROM langgraph_checkpoints WHERE thread_id = ?", (tid,))
                c.execute("DELETE FROM langgraph_requests WHERE thread_id = ?", (tid,))
                c.execute("DELETE FROM langgraph_request_inputs WHERE thread_id = ?", (tid,))
                retire.retire_thread(store, c, tid)
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

            retire.retire_where(store, c, tid, after_kept)
