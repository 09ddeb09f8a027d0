"""LetItLoopCheckpointSaver against LangGraph's own SqliteSaver and AsyncSqliteSaver.

    python benchmarks/bench_langgraph.py [--pairs 400] [--runs 40] [--nodes 20] [--split]

Three measurements, every saver in the same run, medians printed side by side:

1. ``put`` then ``get_tuple`` of one checkpoint (about 2 KB of channel values),
   chained on one thread: the median of ``--pairs`` individually timed pairs.
   Async savers are timed with ``aput`` + ``aget_tuple`` inside one event loop.
2. A 20-node linear StateGraph (``--nodes``) invoked end to end on a fresh thread
   (``invoke`` for the sync savers, ``ainvoke`` for the async ones, LangGraph's
   default ``durability="async"``): the median of ``--runs`` invocations,
   taken in rounds that invoke every saver's graph once, so a busy moment of
   the machine falls on all of them alike. Two floors run in the same rounds:
   the graph with no checkpointer (what LangGraph itself costs) and with
   LangGraph's ``InMemorySaver`` (what checkpointing costs with no storage at
   all). One more row runs the same graph with every node a ``durable_node``
   that records one step: the cost of journaling inside nodes. ``--split``
   adds two rows that split letitloop's own cost: the saver's Python and
   serde with its SQL skipped, and the saver's INSERTs (made-up rows of the
   same sizes) with none of its Python.
3. ``put_writes`` of one small write (what LangGraph does with a
   ``Command(resume=...)`` answer) while another thread of the process
   commits journal steps back to back on the same file, as a durable node
   does: the saver's own wait for SQLite's write lock (polls of 0.05–1 ms)
   against SQLite's busy handler (sleeps of 1, 2, 5, … 100 ms), median,
   99th percentile and largest of ``--writes`` calls.

Bias, stated: letitloop's default durability is "process" (WAL,
synchronous=NORMAL: survives a killed process, not a power loss).
SqliteSaver and AsyncSqliteSaver open the file with SQLite's default
synchronous=FULL, an fsync per commit. The rows "letitloop power" (FULL) and
"SqliteSaver NORMAL" compare equal durability settings. Every file lives in
one temporary folder on one disk; the machine is shared, so treat small
differences as noise. Read the invoke column against the floors: with
``durability="async"`` LangGraph calls a saver from its worker threads while
the graph runs on, so a saver's cost is mostly its calls' share of the GIL
and the thread hand-offs around each SQLite call, not the SQL itself.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypedDict

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from letitloop import Journal, step
from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, durable_node, writing

MESSAGES = [f"message {i}: " + "lorem ipsum dolor sit amet " * 7 for i in range(10)]


def checkpoint() -> dict[str, Any]:
    return {
        "v": 1,
        "id": str(uuid6(clock_seq=-1)),
        "ts": "2026-11-30T00:00:00+00:00",
        "channel_values": {"messages": MESSAGES, "count": 1},
        "channel_versions": {"messages": 1, "count": 1},
        "versions_seen": {},
        "pending_sends": [],
        "updated_channels": None,
    }


# -- savers ----------------------------------------------------------------------


@contextmanager
def letitloop_saver(path: Path, durability: str = "process") -> Iterator[BaseCheckpointSaver[Any]]:
    with LetItLoopCheckpointSaver(path, durability=durability) as saver:  # type: ignore[arg-type]
        yield saver


@contextmanager
def sqlite_saver(path: Path, synchronous: str | None = None) -> Iterator[BaseCheckpointSaver[Any]]:
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    if synchronous:
        conn.execute(f"PRAGMA synchronous = {synchronous}")
    try:
        yield saver
    finally:
        conn.close()


@asynccontextmanager
async def async_letitloop(path: Path) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    async with LetItLoopCheckpointSaver(path) as saver:
        yield saver


@asynccontextmanager
async def async_sqlite(path: Path) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        yield saver


@contextmanager
def no_saver(path: Path) -> Iterator[None]:
    yield None


@contextmanager
def in_memory_saver(path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    yield InMemorySaver()


#: The floors: the graph with no checkpointer, and with one that stores nothing.
FLOORS: dict[str, Callable[[Path], Any]] = {
    "no checkpointer (floor)": no_saver,
    "InMemorySaver (floor)": in_memory_saver,
}
SYNC: dict[str, Callable[[Path], Any]] = {
    "letitloop (process)": letitloop_saver,
    "letitloop (power)": lambda p: letitloop_saver(p, "power"),
    "SqliteSaver (FULL, its default)": sqlite_saver,
    "SqliteSaver (NORMAL)": lambda p: sqlite_saver(p, "NORMAL"),
}


# -- --split: where the saver's time goes -------------------------------------------


class _NullConnection:
    """Takes the saver's INSERTs and does nothing with them."""

    in_transaction = False

    def execute(self, sql: str, params: Any = ()) -> None:
        return None


class _NullStore:
    """The saver's store with its SQL skipped (same lock, so the same hand-offs between threads)."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock
        self.conn = _NullConnection()

    def commit_rows(self, sql: str, rows: Any, begin: Any) -> None:
        """The transaction path (many rows, or an older letitloop's only path): skipped too."""
        with self.lock:
            return None


class SaverWithoutSQL(LetItLoopCheckpointSaver):
    """The saver's Python and serde on every put and put_writes, its SQL skipped."""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        null: Any = _NullStore(self.store.lock)
        return writing.put(null, self.serde, config, checkpoint, metadata)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        null: Any = _NullStore(self.store.lock)
        writing.put_writes(null, self.serde, config, writes, task_id, task_path)


class SQLOnlySaver(LetItLoopCheckpointSaver):
    """The saver's INSERTs with made-up rows of the same sizes, and none of its Python."""

    BLOB = b"x" * 1800  # the 20-node graph's checkpoints average about 1.8 KB

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        conf = config["configurable"]
        row = (conf["thread_id"], "", checkpoint["id"], None, None, "loop", 1, "", "msgpack")
        with self.store.lock:
            self.store.conn.execute(_PUT_SQL, (*row, self.BLOB, '{"source": "loop"}'))
        return {"configurable": {**conf, "checkpoint_ns": "", "checkpoint_id": checkpoint["id"]}}

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        conf = config["configurable"]
        key = (conf["thread_id"], "", conf["checkpoint_id"], task_id, "")
        params = [v for i in range(len(writes)) for v in (*key, i, "c", "msgpack", b"x" * 20)]
        sql = _WRITES_SQL + ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(writes))
        with self.store.lock:
            self.store.conn.execute(sql, params)


_PUT_SQL = (
    "INSERT OR REPLACE INTO langgraph_checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
    "parent_checkpoint_id, run_id, source, step, ts, type, checkpoint, metadata) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_WRITES_SQL = (
    "INSERT OR IGNORE INTO langgraph_writes (thread_id, checkpoint_ns, checkpoint_id, "
    "task_id, task_path, idx, channel, type, value) VALUES "
)

#: Rows of ``--split``: the saver's Python alone, and its SQL alone.
SPLIT: dict[str, Callable[[Path], Any]] = {
    "split: letitloop, SQL skipped": lambda p: SaverWithoutSQL(p),
    "split: the same INSERTs, no saver Python": lambda p: SQLOnlySaver(p),
}

ASYNC: dict[str, Callable[[Path], Any]] = {
    "letitloop async (process)": async_letitloop,
    "AsyncSqliteSaver (FULL, its default)": async_sqlite,
}


# -- 1. put + get_tuple ------------------------------------------------------------


def pairs_sync(saver: BaseCheckpointSaver[Any], n: int) -> list[float]:
    config: dict[str, Any] = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    times = []
    for i in range(n):
        start = time.perf_counter()
        stored = saver.put(config, checkpoint(), {"source": "loop", "step": i}, {"count": 1})  # type: ignore[arg-type]
        got = saver.get_tuple(stored)
        times.append(time.perf_counter() - start)
        assert got is not None
        config = stored  # type: ignore[assignment]
    return times


async def pairs_async(saver: BaseCheckpointSaver[Any], n: int) -> list[float]:
    config: dict[str, Any] = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    times = []
    for i in range(n):
        start = time.perf_counter()
        stored = await saver.aput(config, checkpoint(), {"source": "loop", "step": i}, {"count": 1})  # type: ignore[arg-type]
        got = await saver.aget_tuple(stored)
        times.append(time.perf_counter() - start)
        assert got is not None
        config = stored  # type: ignore[assignment]
    return times


# -- 2. a linear graph of 20 nodes (--nodes) ------------------------------------------


class State(TypedDict):
    trail: list[str]


def plain_node(name: str) -> Callable[[State], dict[str, list[str]]]:
    return lambda s: {"trail": [*s["trail"], name]}


def journaled_node(name: str) -> Callable[[State], dict[str, list[str]]]:
    """The same node as a durable_node whose work is one journaled step."""

    @durable_node
    def node(s: State) -> dict[str, list[str]]:
        return {"trail": [*s["trail"], step("append", str, name)]}

    return node


def linear_graph(
    checkpointer: BaseCheckpointSaver[Any] | None, durable: bool = False, nodes: int = 20
) -> Any:
    """START -> n00 -> n01 -> ... -> END, each node appending its name to the trail."""
    graph = StateGraph(State)
    names = [f"n{i:02d}" for i in range(nodes)]
    for name in names:
        graph.add_node(name, journaled_node(name) if durable else plain_node(name))
    graph.add_edge(START, names[0])
    for a, b in itertools.pairwise(names):
        graph.add_edge(a, b)
    graph.add_edge(names[-1], END)
    return graph.compile(checkpointer=checkpointer)


def invoke_once(app: Any, thread: str) -> float:
    """Seconds for one ``invoke`` of a linear graph on a fresh thread."""
    start = time.perf_counter()
    out = app.invoke({"trail": []}, {"configurable": {"thread_id": thread}})
    elapsed = time.perf_counter() - start
    assert len(out["trail"]) == len(app.nodes) - 1  # every node but START
    return elapsed


async def ainvoke_once(app: Any, thread: str) -> float:
    """Seconds for one ``ainvoke`` of a linear graph on a fresh thread."""
    start = time.perf_counter()
    out = await app.ainvoke({"trail": []}, {"configurable": {"thread_id": thread}})
    elapsed = time.perf_counter() - start
    assert len(out["trail"]) == len(app.nodes) - 1  # every node but START
    return elapsed


def graphs_sync(apps: dict[str, Any], runs: int) -> dict[str, list[float]]:
    """``runs`` rounds, each invoking every app once in turn (two rounds of warm-up first)."""
    times: dict[str, list[float]] = {name: [] for name in apps}
    for r in range(-2, runs):
        for name, app in apps.items():
            elapsed = invoke_once(app, f"g{r}")
            if r >= 0:
                times[name].append(elapsed)
    return times


async def graphs_async(apps: dict[str, Any], runs: int) -> dict[str, list[float]]:
    """:func:`graphs_sync` with ``ainvoke``, inside one event loop."""
    times: dict[str, list[float]] = {name: [] for name in apps}
    for r in range(-2, runs):
        for name, app in apps.items():
            elapsed = await ainvoke_once(app, f"g{r}")
            if r >= 0:
                times[name].append(elapsed)
    return times


# -- 3. LangGraph's writes while a durable node commits ------------------------------


def writes_under_journal(path: Path, n: int, busy_handler: bool) -> list[float]:
    """``put_writes`` latencies while another thread commits journal steps to ``path``."""
    import threading

    from letitloop.adapters.langgraph import polled
    from letitloop.stores.sqlite.sqlerrors import BUSY_TIMEOUT_MS

    polled_commit = polled.commit
    with LetItLoopCheckpointSaver(path) as saver:
        if busy_handler:  # the portable twin: the store's transaction, SQLite's sleeps
            saver.store.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            polled.commit = lambda store, sql, rows: store.write_many(sql, rows)
        stored = saver.put(
            {"configurable": {"thread_id": "w", "checkpoint_ns": ""}},
            checkpoint(),  # type: ignore[arg-type]
            {"source": "input", "step": -1},
            {},
        )
        stop = threading.Event()

        def journal() -> None:
            with Journal("busy", run=f"r-{busy_handler}", path=path) as j:
                i = 0
                while not stop.is_set():
                    j.step(f"s{i}", str, i)
                    i += 1

        worker = threading.Thread(target=journal)
        worker.start()
        times = []
        try:
            time.sleep(0.1)
            for k in range(n):
                start = time.perf_counter()
                saver.put_writes(stored, [("answer", k)], f"task-{busy_handler}-{k}")
                times.append(time.perf_counter() - start)
                time.sleep(0.002)  # a write now and then, as LangGraph's are
        finally:
            stop.set()
            worker.join()
            polled.commit = polled_commit
    return sorted(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=400, help="put+get_tuple pairs per saver")
    parser.add_argument("--runs", type=int, default=40, help="rounds of graph invocations")
    parser.add_argument("--nodes", type=int, default=20, help="nodes of the linear graph")
    parser.add_argument("--writes", type=int, default=400, help="put_writes under a journal")
    parser.add_argument(
        "--split",
        action="store_true",
        help="two more graph rows: the saver's Python with its SQL skipped, and its SQL alone",
    )
    args = parser.parse_args()
    n = args.nodes

    print(f"Python {platform.python_version()} ({sys.platform}), SQLite {sqlite3.sqlite_version}")
    print(
        f"langgraph {version('langgraph')}, langgraph-checkpoint "
        f"{version('langgraph-checkpoint')}, langgraph-checkpoint-sqlite "
        f"{version('langgraph-checkpoint-sqlite')}, letitloop {version('letitloop')}"
    )
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}\n")

    pairs: dict[str, float] = {}
    graphs: dict[str, float] = {}
    #: Per graph, the median over rounds of its time / each floor's time in the same round.
    ratios: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        print(f"files in {base}\n")
        for i, (name, make) in enumerate({**FLOORS, **SYNC}.items()):
            with make(base / f"pairs-{i}.db") as saver:
                if saver is not None:
                    pairs_sync(saver, 20)  # warm-up: schema, page cache
                    pairs[name] = statistics.median(pairs_sync(saver, args.pairs))

        # The graphs: every saver's app invoked once per round, in turn.
        with ExitStack() as stack:
            apps = {
                name: linear_graph(stack.enter_context(make(base / f"graph-{i}.db")), nodes=n)
                for i, (name, make) in enumerate({**FLOORS, **SYNC}.items())
            }
            for i, (name, make) in enumerate(SPLIT.items() if args.split else ()):
                saver = stack.enter_context(make(base / f"split-{i}.db"))
                apps[name] = linear_graph(saver, nodes=n)
            durable_name = f"letitloop (process) + {args.nodes} durable_node"
            apps[durable_name] = linear_graph(
                stack.enter_context(letitloop_saver(base / "durable.db")), durable=True, nodes=n
            )
            rounds = graphs_sync(apps, args.runs)
            bare, memory = rounds["no checkpointer (floor)"], rounds["InMemorySaver (floor)"]
            for name, times in rounds.items():
                graphs[name] = statistics.median(times)
                ratios[name] = (
                    statistics.median(t / b for t, b in zip(times, bare, strict=True)),
                    statistics.median(t / m for t, m in zip(times, memory, strict=True)),
                )

        async def run_async() -> None:
            for i, (name, make) in enumerate(ASYNC.items()):
                async with make(base / f"apairs-{i}.db") as saver:
                    await pairs_async(saver, 20)
                    pairs[name] = statistics.median(await pairs_async(saver, args.pairs))
            async with AsyncExitStack() as stack:
                apps = {
                    name: linear_graph(
                        await stack.enter_async_context(make(base / f"ag-{i}.db")), nodes=n
                    )
                    for i, (name, make) in enumerate(ASYNC.items())
                }
                for name, times in (await graphs_async(apps, args.runs)).items():
                    graphs[name] = statistics.median(times)

        asyncio.run(run_async())

        contended = {
            "saver's polls (0.05-1 ms)": writes_under_journal(base / "poll.db", args.writes, False),
            "SQLite busy handler": writes_under_journal(base / "busy.db", args.writes, True),
        }

    bare, memory = graphs["no checkpointer (floor)"], graphs["InMemorySaver (floor)"]
    width = max(len(n) for n in graphs)
    print(
        f"{'saver':<{width}}  {'put+get_tuple':>13}  {f'{args.nodes}-node invoke':>14}  "
        f"{'per 10 nodes':>12}  {'x no checkpointer':>17}  {'x InMemorySaver':>15}"
    )
    for name, graph in graphs.items():
        pair = pairs.get(name)
        pair_text = "-" if pair is None else f"{pair * 1e6:.0f} µs"
        # Async rows ran in rounds of their own: their ratios are of medians.
        to_bare, to_memory = ratios.get(name, (graph / bare, graph / memory))
        print(
            f"{name:<{width}}  {pair_text:>13}  {graph * 1e3:>11.1f} ms  "
            f"{graph * 1e4 / n:>9.1f} ms  {to_bare:>16.2f}x  {to_memory:>14.2f}x"
        )
    print(
        f"(medians: put+get_tuple of {args.pairs} pairs; invoke of {args.runs} rounds, every "
        f"sync graph once per round; ratios are per round, then the median; async rows' "
        f"ratios are of medians)"
    )

    print("\nput_writes while another thread commits journal steps to the same file")
    for name, times in contended.items():
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        print(
            f"{name:<26}  median {statistics.median(times) * 1e3:6.2f} ms  "
            f"p99 {p99 * 1e3:6.2f} ms  max {times[-1] * 1e3:6.2f} ms"
        )


if __name__ == "__main__":
    main()
