"""Retiring the durable-node runs of deleted, pruned and overwritten threads.

A durable node's runs are named after their thread (``identity.py``), so a
thread's runs are found with one indexed range query per goal. Retiring a
run deletes its row, its attempts and its steps, and the lock file a dead
holder left behind. A run that a live process holds at that moment (a node
running right now) cannot be deleted under it: it is renamed
``<name>@retired:<id>`` instead, which no node ever looks up again, and the
next retirement of the thread (or ``lil gc``) deletes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ...stores.sqlite import locks
from ...stores.sqlite.goals import delete_run_rows
from ...stores.sqlite.holding import run_lock_path
from ...stores.sqlite.store import Store
from .identity import NS_SEP, thread_prefix

#: Appended to the name of a retired run that a live process still holds.
RETIRED = "@retired:"


@dataclass(frozen=True)
class NodeRun:
    """One durable-node run as the retirement sees it."""

    id: str
    table: str
    recorded: dict[str, Any]


def _recorded(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text)["langgraph"] if text else None
    except (ValueError, KeyError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def thread_runs(c: sqlite3.Connection, thread_id: str) -> list[NodeRun]:
    """Inside a transaction: every durable-node run of ``thread_id``, in every goal."""
    prefix = thread_prefix(thread_id)
    end = prefix[:-1] + chr(ord(NS_SEP) + 1)
    found = []
    for goal, table in c.execute("SELECT goal, journal_table FROM goals").fetchall():
        for run_id, text in c.execute(
            "SELECT id, input FROM runs WHERE goal = ? AND name >= ? AND name < ?",
            (goal, prefix, end),
        ):
            recorded = _recorded(text)
            if recorded.get("thread") == thread_id:  # the hash in the name could collide
                found.append(NodeRun(str(run_id), str(table), recorded))
    return found


def runs_of_langgraph_runs(c: sqlite3.Connection, run_ids: Iterable[str]) -> list[NodeRun]:
    """Inside a transaction: durable-node runs recorded under one of LangGraph's ``run_ids``."""
    wanted = set(run_ids)
    found = []
    for run_id, table, text in c.execute(
        "SELECT r.id, g.journal_table, r.input FROM runs AS r JOIN goals AS g ON g.goal = r.goal "
        "WHERE r.input LIKE '%\"langgraph\"%'"
    ):
        recorded = _recorded(text)
        if recorded.get("run_id") in wanted:
            found.append(NodeRun(str(run_id), str(table), recorded))
    return found


@contextlib.contextmanager
def _held_apart(store: Store, runs: list[NodeRun]) -> Iterator[tuple[list[NodeRun], list[NodeRun]]]:
    """``(free, held)``: the runs whose lock this process could take at once, and the others.

    The free runs' locks are held until the block ends, so no process opens
    one of them meanwhile; releasing removes their lock files.
    """
    taken: list[locks.Lock] = []
    free, held = [], []
    try:
        for run in runs:
            lock = locks.new_lock(run_lock_path(store, run.id))
            if locks.acquire(lock, 0):
                taken.append(lock)
                free.append(run)
            else:
                held.append(run)
        yield free, held
    finally:
        for lock in taken:
            locks.release(lock)


def _delete(c: sqlite3.Connection, runs: list[NodeRun]) -> int:
    by_table: dict[str, list[str]] = {}
    for run in runs:
        by_table.setdefault(run.table, []).append(run.id)
    rows = 0
    for table, ids in by_table.items():
        # 500 ids per statement stays far below SQLite's bound-variable limit.
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            # Journal table names are generated ([a-z0-9_]), never user text.
            rows += delete_run_rows(c, table, chunk)
            c.execute(f"DELETE FROM attempts WHERE run IN ({marks})", chunk)
            c.execute(f"DELETE FROM runs WHERE id IN ({marks})", chunk)
    return rows


def retire(store: Store, c: sqlite3.Connection, runs: list[NodeRun]) -> int:
    """Inside ``store``'s write transaction ``c``: retire ``runs``; returns the step rows deleted.

    Free runs are deleted with their rows; runs a live process holds are
    renamed out of reach (see the module docstring).
    """
    if not runs:
        return 0
    with _held_apart(store, runs) as (free, held):
        for run in held:
            c.execute(
                "UPDATE runs SET name = name || ? || id WHERE id = ? AND instr(name, ?) = 0",
                (RETIRED, run.id, RETIRED),
            )
        return _delete(c, free)


def retire_thread(store: Store, c: sqlite3.Connection, thread_id: str) -> int:
    """Inside a write transaction: retire every durable-node run of ``thread_id``."""
    return retire(store, c, thread_runs(c, thread_id))


def retire_where(
    store: Store,
    c: sqlite3.Connection,
    thread_id: str,
    keep: Callable[[dict[str, Any]], bool],
) -> int:
    """Inside a write transaction: retire the runs of ``thread_id`` that ``keep`` refuses."""
    return retire(store, c, [r for r in thread_runs(c, thread_id) if not keep(r.recorded)])


def delete_node_runs(thread_id: str, path: str | os.PathLike[str] | None = None) -> int:
    """Delete every durable-node run of ``thread_id`` from a journal file; returns how many.

    ``LetItLoopCheckpointSaver.delete_thread`` does this for its own file.
    Call this when the durable nodes journal elsewhere (``durable_node(path=...)``,
    or a graph whose checkpointer is not a ``LetItLoopCheckpointSaver``) and
    you delete the thread from that checkpointer: otherwise a thread recreated
    with the same checkpoint ids (``copy_thread``) could find the old runs.
    ``path`` follows the journal's rules (``$LETITLOOP_DB``,
    ``.letitloop/journal.db``). Runs a live process holds are renamed out of
    reach instead of deleted (counted too).
    """
    store = Store(path)
    try:
        with store.write() as c:
            runs = thread_runs(c, str(thread_id))
            retire(store, c, runs)
        return len(runs)
    finally:
        store.close()
