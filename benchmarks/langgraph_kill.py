"""LangGraph graphs with durable nodes SIGKILLed at random points: what runs again?

    python -m benchmarks.langgraph_kill [--trials 50] [--modes sync,async,exit]
        [--states instant,large] [--journal shared|separate] [--scenario steps,resume]
        [--seed S] [--no-write]

Two scenarios, each trial on a fresh thread of one journal file:

- ``steps``: a linear graph of four ``durable_node`` nodes, each making five
  ``step()`` calls. A child process runs the graph and is SIGKILLed at a
  random moment (uniform over the time an uninterrupted run takes); fresh
  children then resume the thread until it finishes, as a user would:
  ``invoke(None, config)`` when the thread has a checkpoint with work left,
  ``invoke(input, config)`` when it has none (nothing was saved: ``"exit"``
  mode, or a kill before the first checkpoint). Every step function appends
  ``CALL`` to a side file when it starts, and the node appends ``RET`` once
  ``step()`` has returned. A **re-run** is a ``CALL`` of a key after its
  ``RET``: a returned call made again. The final state is checked too.
- ``resume``: a node asks a question with ``interrupt()``; a child answers
  with ``Command(resume=...)`` and is SIGKILLed at a random moment; fresh
  children then resume with ``invoke(None)``. **Asked again** counts the
  trials where the answer had been lost: the graph paused on the same
  question instead of going on.

``--states large`` adds a 10 MB string to the graph state, so that each
checkpoint takes long to write (LangGraph's ``"async"`` mode writes it while
the next superstep runs, ``"exit"`` only when the graph stops).
``--journal separate`` gives the durable nodes their own journal file
instead of the saver's. ``--saver sqlite`` runs the ``resume`` scenario on
LangGraph's ``SqliteSaver`` (durable nodes in a separate letitloop file), for
comparison.

Children are forked from this process after it imported LangGraph (no
interpreter start per attempt); none inherits an open SQLite connection.
The figures depend on the machine's speed and load: the kill lands at a
uniformly random moment of an uninterrupted run's duration, measured first.
"""

from __future__ import annotations

import argparse
import itertools
import json
import operator
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypedDict

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from letitloop import step
from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, durable_node

NODES = ("n0", "n1", "n2", "n3")
STEPS = 5
EXPECTED = [f"{n}-{i}" for n in NODES for i in range(STEPS)]
#: ``resume``: the steps made right after the answer (journal writes racing LangGraph's).
FINISH_STEPS = 20
#: ``resume``: the kill lands this long at most after the node received the answer.
ANSWER_WINDOW = 0.02


class StepsState(TypedDict, total=False):
    blob: str
    acc: Annotated[list[str], operator.add]


class AskState(TypedDict, total=False):
    blob: str
    acc: Annotated[list[str], operator.add]
    answer: str


@dataclass(frozen=True)
class Setup:
    """One configuration: where things live and how the graph runs."""

    folder: Path
    mode: str
    state: str
    journal: str = "shared"
    saver: str = "letitloop"
    large_mb: int = 10

    @property
    def db(self) -> Path:
        return self.folder / "graph.db"

    @property
    def journal_path(self) -> Path | None:
        return self.folder / "journal.db" if self.journal == "separate" else None


# -- what runs in a child ---------------------------------------------------------


def _log(side: Path, text: str) -> None:
    # O_APPEND write(2): in the page cache as soon as it returns, so it
    # survives the SIGKILL of this process.
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


def _saver(setup: Setup, side: Path | None = None) -> Any:
    """The checkpointer; with ``side`` it logs ``SAVED <time>`` once a resume answer is saved."""
    saver: Any
    if setup.saver == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(sqlite3.connect(setup.db, check_same_thread=False))
    else:
        saver = LetItLoopCheckpointSaver(setup.db)
    if side is not None:
        put_writes = saver.put_writes

        def logged(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            put_writes(config, writes, task_id, task_path)
            if any(channel == "__resume__" for channel, _ in writes):
                _log(side, f"SAVED {time.monotonic()}")

        saver.put_writes = logged
    return saver


def _steps_graph(setup: Setup, side: Path, saver: Any) -> Any:
    def work(node: str, i: int) -> str:
        _log(side, f"CALL {node}/s{i}")
        return f"{node}-{i}"

    def make(node: str) -> Callable[[StepsState], dict[str, Any]]:
        def body(state: StepsState) -> dict[str, Any]:
            _log(side, f"NODE {node}")
            out = []
            for i in range(STEPS):
                out.append(step(f"s{i}", work, node, i))
                _log(side, f"RET {node}/s{i}")
            return {"acc": out}

        body.__name__ = body.__qualname__ = node
        return durable_node(path=setup.journal_path)(body)

    g = StateGraph(StepsState)
    for node in NODES:
        g.add_node(node, make(node))
    g.add_edge(START, NODES[0])
    for a, b in itertools.pairwise(NODES):
        g.add_edge(a, b)
    g.add_edge(NODES[-1], END)
    return g.compile(checkpointer=saver)


def _ask_graph(setup: Setup, side: Path, saver: Any) -> Any:
    def work(node: str, i: int) -> str:
        _log(side, f"CALL {node}/s{i}")
        return f"{node}-{i}"

    @durable_node(path=setup.journal_path)
    def prepare(state: AskState) -> dict[str, Any]:
        return {"acc": [step(f"s{i}", work, "prepare", i) for i in range(3)]}

    @durable_node(path=setup.journal_path)
    def ask(state: AskState) -> dict[str, Any]:
        _log(side, "ASK")
        answer = interrupt("go on?")
        _log(side, f"ANSWER {time.monotonic()}")
        return {"answer": answer, "acc": [step("act", work, "ask", 0)]}

    @durable_node(path=setup.journal_path)
    def finish(state: AskState) -> dict[str, Any]:
        return {"acc": [step(f"s{i}", work, "finish", i) for i in range(FINISH_STEPS)]}

    g = StateGraph(AskState)
    g.add_node("prepare", prepare)
    g.add_node("ask", ask)
    g.add_node("finish", finish)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "ask")
    g.add_edge("ask", "finish")
    g.add_edge("finish", END)
    return g.compile(checkpointer=saver)


def _input(setup: Setup) -> dict[str, Any]:
    return {"blob": "x" * (setup.large_mb << 20)} if setup.state == "large" else {"blob": ""}


def child_steps(setup: Setup, thread: str, side: Path) -> None:
    """Run or resume the ``steps`` graph on ``thread`` until it stops."""
    saver = _saver(setup)
    app = _steps_graph(setup, side, saver)
    config = {"configurable": {"thread_id": thread}}
    _log(side, f"START {os.getpid()}")
    # A thread with a checkpoint resumes (a finished one has nothing left to run);
    # ``get_state().next`` is no guide: it leaves out a task whose writes are saved.
    if saver.get_tuple(config) is not None:
        app.invoke(None, config, durability=setup.mode)
    else:
        app.invoke(_input(setup), config, durability=setup.mode)
    _log(side, "DONE")


def child_ask_first(setup: Setup, thread: str, side: Path) -> None:
    """Run the ``resume`` graph up to its question."""
    app = _ask_graph(setup, side, _saver(setup, side))
    app.invoke(_input(setup), {"configurable": {"thread_id": thread}}, durability=setup.mode)


def child_answer(setup: Setup, thread: str, side: Path) -> None:
    """Answer the question (the child that gets killed)."""
    app = _ask_graph(setup, side, _saver(setup, side))
    _log(side, f"RESUME {os.getpid()}")
    app.invoke(
        Command(resume=f"yes-{thread}"),
        {"configurable": {"thread_id": thread}},
        durability=setup.mode,
    )
    _log(side, "DONE")


def child_ask_resume(setup: Setup, thread: str, side: Path) -> None:
    """After a kill: go on, answering again only if the graph asks again."""
    app = _ask_graph(setup, side, _saver(setup, side))
    config = {"configurable": {"thread_id": thread}}
    out = app.invoke(None, config, durability=setup.mode)
    if "__interrupt__" in out:
        _log(side, "ASKED-AGAIN")
        app.invoke(Command(resume=f"yes-{thread}"), config, durability=setup.mode)
    _log(side, "DONE")


def fork(fn: Callable[..., None], *args: Any) -> int:
    """``fn(*args)`` in a forked child; returns its pid (exit 0, or 1 with a traceback)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            fn(*args)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def wait(pid: int, timeout: float = 120.0) -> int:
    """The child's exit status: its code, or -N for signal N. Kills it after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise TimeoutError(f"child {pid} hung for {timeout:g} s")
        time.sleep(0.001)


def run_killed(
    fn: Callable[..., None],
    args: tuple[Any, ...],
    after: float,
    *,
    once: tuple[Path, str] | None = None,
) -> int:
    """Fork ``fn(*args)`` and SIGKILL it ``after`` seconds later unless it ended first.

    With ``once=(side, text)``, the delay counts from the moment ``text``
    appears in the side file.
    """
    pid = fork(fn, *args)
    if once is not None:
        side, text = once
        while text not in side.read_text(encoding="utf-8") if side.exists() else True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            time.sleep(0.0002)
    deadline = time.monotonic() + after
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        time.sleep(min(0.0005, max(0.0, deadline - time.monotonic())))
    os.kill(pid, signal.SIGKILL)
    return wait(pid)


# -- scoring ------------------------------------------------------------------------


def _lines(side: Path) -> list[str]:
    return side.read_text(encoding="utf-8").splitlines() if side.exists() else []


def reruns(lines: list[str]) -> int:
    """How many CALLs of a key came after that key's RET: returned calls made again."""
    returned: set[str] = set()
    count = 0
    for line in lines:
        word, _, key = line.partition(" ")
        if word == "RET":
            returned.add(key)
        elif word == "CALL" and key in returned:
            count += 1
    return count


def node_reruns(lines: list[str]) -> int:
    """How many times a node started again after all its calls had returned."""
    finished: set[str] = set()
    count = 0
    for line in lines:
        word, _, key = line.partition(" ")
        if word == "RET" and key.endswith(f"/s{STEPS - 1}"):
            finished.add(key.split("/")[0])
        elif word == "NODE" and key in finished:
            count += 1
    return count


def _asked_again(lines: list[str]) -> bool:
    """Whether the graph asked again after a node had received the answer."""
    answered = False
    for line in lines:
        if line.startswith("ANSWER"):
            answered = True
        elif line == "ASKED-AGAIN" and answered:
            return True
    return False


def answer_margin(lines: list[str]) -> float | None:
    """Milliseconds from a node receiving the answer to the answer being committed (<0: before)."""
    got = saved = None
    for line in lines:
        word, _, rest = line.partition(" ")
        if word == "ANSWER" and got is None:
            got = float(rest)
        elif word == "SAVED" and saved is None:
            saved = float(rest)
    if got is None or saved is None:
        return None
    return (saved - got) * 1000


@dataclass
class Outcome:
    """What the trials of one configuration showed."""

    scenario: str
    mode: str
    state: str
    journal: str
    saver: str = "letitloop"
    trials: int = 0
    kills: int = 0
    reruns: int = 0
    trials_with_reruns: int = 0
    node_reruns: int = 0
    asked_again: int = 0
    #: resume: answers committed after the node had received them, and the latest.
    answers_saved_late: int = 0
    latest_answer_ms: float | None = None
    wrong: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "errors"} | {
            "errors": self.errors[:3]
        }


def _final(setup: Setup, thread: str) -> dict[str, Any]:
    if setup.saver == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(setup.db, check_same_thread=False)
        try:
            tup = SqliteSaver(conn).get_tuple({"configurable": {"thread_id": thread}})
        finally:
            conn.close()
    else:
        with LetItLoopCheckpointSaver(setup.db) as saver:
            tup = saver.get_tuple({"configurable": {"thread_id": thread}})
    return dict(tup.checkpoint["channel_values"]) if tup else {}


def _resume(fn: Callable[..., None], setup: Setup, thread: str, side: Path) -> None:
    """A fresh child resumes the thread to its end (it is not killed)."""
    code = wait(fork(fn, setup, thread, side))
    if code != 0:
        raise RuntimeError(f"a resuming child exited with {code}")


def calibrate(setup: Setup, scenario: str, repeats: int) -> float:
    """The median seconds an uninterrupted child takes (from fork to exit)."""
    times = []
    for n in range(repeats):
        side = setup.folder / f"calibrate-{scenario}-{n}.log"
        thread = f"calibrate-{scenario}-{n}"
        if scenario == "resume":
            if wait(fork(child_ask_first, setup, thread, side)) != 0:
                raise RuntimeError("calibration child failed")
            fn: Callable[..., None] = child_answer
        else:
            fn = child_steps
        started = time.monotonic()
        code = wait(fork(fn, setup, thread, side))
        times.append(time.monotonic() - started)
        if code != 0:
            raise RuntimeError(f"calibration child exited with {code}")
    times.sort()
    return times[len(times) // 2]


def run(
    setup: Setup, scenario: str, trials: int, rng: random.Random, calibrations: int = 3
) -> Outcome:
    """``trials`` killed-and-resumed trials of ``scenario`` in one configuration."""
    out = Outcome(scenario, setup.mode, setup.state, setup.journal, setup.saver)
    started = time.monotonic()
    span = calibrate(setup, scenario, calibrations)
    for n in range(trials):
        thread = f"{scenario}-{n}"
        side = setup.folder / f"{scenario}-{n}.log"
        try:
            if scenario == "resume":
                if wait(fork(child_ask_first, setup, thread, side)) != 0:
                    raise RuntimeError("the first child failed")
                # The kill lands after the node received the answer: from then on
                # the answer must not be lost.
                code = run_killed(
                    child_answer,
                    (setup, thread, side),
                    rng.uniform(0, ANSWER_WINDOW),
                    once=(side, "ANSWER"),
                )
                out.kills += code == -signal.SIGKILL
                if code not in (0, -signal.SIGKILL):
                    raise RuntimeError(f"the answering child exited with {code}")
                _resume(child_ask_resume, setup, thread, side)
                values = _final(setup, thread)
                expected = [f"prepare-{i}" for i in range(3)] + ["ask-0"]
                expected += [f"finish-{i}" for i in range(FINISH_STEPS)]
                ok = values.get("answer") == f"yes-{thread}" and values.get("acc") == expected
            else:
                code = run_killed(child_steps, (setup, thread, side), rng.uniform(0, span))
                out.kills += code == -signal.SIGKILL
                if code not in (0, -signal.SIGKILL):
                    raise RuntimeError(f"the first child exited with {code}")
                _resume(child_steps, setup, thread, side)
                got = _final(setup, thread).get("acc")
                ok = got == EXPECTED
                if not ok:
                    out.errors.append(f"trial {n}: final acc {got}")
        except Exception as exc:  # counted, and the next trial goes on
            out.errors.append(f"trial {n}: {type(exc).__name__}: {exc}")
            ok = False
        lines = _lines(side)
        out.trials += 1
        found = reruns(lines)
        out.reruns += found
        out.trials_with_reruns += found > 0
        out.node_reruns += node_reruns(lines)
        out.asked_again += _asked_again(lines)
        margin = answer_margin(lines) if scenario == "resume" else None
        if margin is not None:
            out.answers_saved_late += margin > 0
            latest = out.latest_answer_ms
            out.latest_answer_ms = round(margin if latest is None else max(latest, margin), 2)
        out.wrong += not ok
    out.seconds = time.monotonic() - started
    return out


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--modes", default="sync,async,exit")
    parser.add_argument("--states", default="instant,large")
    parser.add_argument("--journal", default="shared", help="shared, separate, or both")
    parser.add_argument("--saver", default="letitloop", help="letitloop, sqlite, or both")
    parser.add_argument("--scenario", default="steps,resume")
    parser.add_argument("--large-mb", type=int, default=10, help="--states large: MB of state")
    parser.add_argument("--calibrations", type=int, default=3)
    parser.add_argument("--seed", default=None)
    parser.add_argument("--no-write", action="store_true", help="do not write results/")
    parser.add_argument("--out", default="langgraph_kill", help="results/<OUT>.md")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    outcomes = []
    configurations = [
        (scenario, state, mode, saver, journal)
        for scenario in args.scenario.split(",")
        for saver in args.saver.split(",")
        for journal in args.journal.split(",")
        for state in args.states.split(",")
        for mode in args.modes.split(",")
        # SqliteSaver's file is not a journal: its durable nodes journal apart.
        if not (saver == "sqlite" and journal == "shared")
    ]
    for scenario, state, mode, saver, journal in configurations:
        with tempfile.TemporaryDirectory(prefix="lg-kill-") as tmp:
            setup = Setup(Path(tmp), mode, state, journal, saver, args.large_mb)
            outcome = run(setup, scenario, args.trials, rng, args.calibrations)
        outcomes.append(outcome.as_dict())
        print(json.dumps(outcome.as_dict()), flush=True)
    if not args.no_write:
        _write(outcomes, argv, args.out)
    return outcomes


def _write(outcomes: list[dict[str, Any]], argv: list[str] | None, name: str) -> None:
    from benchmarks._report import environment, table

    rows = [
        [
            o["scenario"],
            o["mode"],
            o["state"],
            o["journal"],
            o["saver"],
            o["trials"],
            o["kills"],
            f"{o['reruns']} in {o['trials_with_reruns']}",
            o["node_reruns"],
            o["asked_again"] if o["scenario"] == "resume" else "",
            (
                f"{o['answers_saved_late']} (latest {o['latest_answer_ms']} ms)"
                if o["scenario"] == "resume" and o["latest_answer_ms"] is not None
                else "no answer write (exit mode)"
                if o["scenario"] == "resume"
                else ""
            ),
            o["wrong"],
        ]
        for o in outcomes
    ]
    headers = [
        "scenario",
        "mode",
        "state",
        "journal",
        "saver",
        "trials",
        "kills",
        "returned calls re-run (in trials)",
        "nodes re-run",
        "asked again",
        "answer committed after the node had it",
        "wrong",
    ]
    text = (
        f"# langgraph_kill\n\n{environment()}\n\n"
        f"`python -m benchmarks.langgraph_kill {' '.join(argv or sys.argv[1:])}`\n\n"
        f"{table(headers, rows)}\n"
    )
    print(text)
    from benchmarks._report import RESULTS

    (RESULTS / f"{name}.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
