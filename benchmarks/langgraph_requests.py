"""The same LangGraph request is never paid twice: real SIGKILLs, counted outside the journal.

    python -m benchmarks.langgraph_requests [--trials 20]
        [--scenarios copies,returned,turns,changed]
        [--graphs nodes,react] [--seed S]

Each trial runs a user's program in forked child processes on a fresh thread
of one journal file, written the way LangGraph's docs write it:
``builder.compile(checkpointer=LetItLoopCheckpointSaver())`` and
``graph.invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": ...}})``,
every adapter argument left at its default. Two graphs:

- ``nodes``: a ``StateGraph(MessagesState)`` with a model node and a tool node
  (LangGraph's quickstart agent), each a ``@durable_node`` making its calls
  with ``step()``;
- ``react``: LangGraph's prebuilt ``create_react_agent`` (its own model and
  ``ToolNode``, nothing of letitloop inside);
- ``approval``: ``nodes`` whose tool node asks a human with ``interrupt()``
  before it books; the program answers ``Command(resume="yes")``.

The model is an offline fake chat model: it calls ``lookup`` with the user's
text, then ``book`` with what ``lookup`` returned, then answers. Every model
and tool call appends ``start KEY`` to a side file before it works and
``end KEY`` after (``KEY`` names the call by its content), with an
``O_APPEND`` write that survives the kill. Nothing here reads the journal.

Scenarios:

- ``copies``: two processes invoke the same thread with the same input at
  the same moment (a double deploy, a retried request); in every other
  trial the first is SIGKILLed at a random moment.
- ``returned``: the program is SIGKILLed right after ``invoke`` returned,
  before it used the answer; a supervisor runs it again.
- ``turns``: the program runs turn 1 then turn 2 and is SIGKILLed at a
  random moment of turn 2; it is run again from its start.
- ``changed``: the program is SIGKILLed at a random moment of its turn, and
  the rerun asks with a changed prompt.

Counted per scenario: **returned calls repeated** (a ``start`` of a call after
the ``step()`` around it returned, which the node logs as ``returned KEY``; in
``react``, which has no steps, after its ``end``), **calls paid twice** (a
``start`` after an ``end``: also a call the kill caught after it answered and
before ``step()`` recorded it, in flight by the journal's rules),
**differing answers** (an answer that is not the uninterrupted run's),
**resume errors** (an attempt that was not killed and did not exit 0), and
kills that landed.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from letitloop import step
from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, durable_node

SCENARIOS = ("copies", "returned", "turns", "changed")
GRAPHS = ("nodes", "react", "approval")
#: Seconds each fake call takes: long enough for a kill to land inside a call.
CALL_SECONDS = 0.004


def _log(side: str, text: str) -> None:
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


# -- the user's program: a fake model, two tools, a graph -------------------------


def _side() -> str:
    return os.environ["LANGGRAPH_REQUESTS_SIDE"]


def _paid(key: str) -> None:
    _log(_side(), f"start {key}")
    time.sleep(CALL_SECONDS)


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else json.dumps(message.content)


def _model_call(messages: Sequence[Any]) -> tuple[str, Any, list[Any]]:
    """The key naming a model call by its content, the user's message, the tool results."""
    asked = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    since = messages[messages.index(asked) + 1 :] if asked in messages else []
    tools = [m for m in since if isinstance(m, ToolMessage)]
    return f"model {_text(asked)} after {len(tools)} tools", asked, tools


class FakeChat(BaseChatModel):
    """An offline chat model: ``lookup`` the user's text, ``book`` what it found, answer."""

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        key, asked, tools = _model_call(messages)
        _paid(key)
        if not tools:
            reply = AIMessage(
                "",
                tool_calls=[
                    {"name": "lookup", "args": {"q": _text(asked)}, "id": f"l-{len(messages)}"}
                ],
            )
        elif len(tools) == 1:
            reply = AIMessage(
                "",
                tool_calls=[
                    {"name": "book", "args": {"what": _text(tools[0])}, "id": f"b-{len(messages)}"}
                ],
            )
        else:
            reply = AIMessage(f"booked {_text(tools[1])} for {_text(asked)!r}")
        _log(_side(), f"end {key}")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    @property
    def _llm_type(self) -> str:
        return "fake-offline"

    def bind_tools(self, tools: Any, **kw: Any) -> Any:
        return self


@tool
def lookup(q: str) -> str:
    """Find an offer for q."""
    _paid(f"tool lookup {q}")
    out = f"offer-{len(q)}"
    _log(_side(), f"end tool lookup {q}")
    return out


@tool
def book(what: str) -> str:
    """Book an offer (a side effect)."""
    _paid(f"tool book {what}")
    out = f"booking-{what}"
    _log(_side(), f"end tool book {what}")
    return out


TOOLS = {t.name: t for t in (lookup, book)}
model = FakeChat()


@durable_node
def call_model(state: MessagesState) -> dict[str, Any]:
    reply = step("model", model.invoke, state["messages"])
    _log(_side(), f"returned {_model_call(state['messages'])[0]}")  # step() returned
    return {"messages": [reply]}


@durable_node
def call_tools(state: MessagesState) -> dict[str, Any]:
    out = []
    for call in state["messages"][-1].tool_calls:  # type: ignore[union-attr]
        result = step(f"tool:{call['id']}", TOOLS[call["name"]].invoke, call["args"])
        _log(_side(), f"returned tool {call['name']} {next(iter(call['args'].values()))}")
        out.append(ToolMessage(content=result, tool_call_id=call["id"]))
    return {"messages": out}


@durable_node
def call_tools_approved(state: MessagesState) -> dict[str, Any]:
    """The tool node, asking a human (``interrupt``) before each booking."""
    out = []
    for call in state["messages"][-1].tool_calls:  # type: ignore[union-attr]
        if call["name"] == "book" and interrupt({"approve": call["args"]}) != "yes":
            out.append(ToolMessage(content="refused", tool_call_id=call["id"]))
            continue
        result = step(f"tool:{call['id']}", TOOLS[call["name"]].invoke, call["args"])
        _log(_side(), f"returned tool {call['name']} {next(iter(call['args'].values()))}")
        out.append(ToolMessage(content=result, tool_call_id=call["id"]))
    return {"messages": out}


def _route(state: MessagesState) -> str:
    return "tools" if state["messages"][-1].tool_calls else END  # type: ignore[union-attr]


def build(kind: str, db: str) -> Any:
    """The graph, compiled with the adapter's saver at its defaults (``durability=`` from
    ``LANGGRAPH_REQUESTS_DURABILITY`` when set: the power-durability trials)."""
    durability = os.environ.get("LANGGRAPH_REQUESTS_DURABILITY")
    saver = (
        LetItLoopCheckpointSaver(db)
        if durability is None
        else LetItLoopCheckpointSaver(db, durability=durability)  # type: ignore[arg-type]
    )
    if kind == "react":
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, list(TOOLS.values()), checkpointer=saver)
    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", call_tools_approved if kind == "approval" else call_tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", _route, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=saver)


async def _ainvoke(graph: Any, text: str, config: Any) -> Any:
    result = await graph.ainvoke({"messages": [("user", text)]}, config)
    while "__interrupt__" in result:  # a human approves (kind "approval")
        result = await graph.ainvoke(Command(resume="yes"), config)
    return result


def program(
    kind: str, db: str, thread: str, turns: list[str], out: str, kill_turn: int, kill_in: float
) -> None:
    """The user's program: ask each turn in order; the answers go to ``out``.

    ``kill_turn`` >= 0: SIGKILL this process ``kill_in`` seconds into that
    turn (a timer thread); -1: right after the last turn returned.
    """
    graph = build(kind, db)
    config = {"configurable": {"thread_id": thread}}
    answers, seconds = [], []
    for n, text in enumerate(turns):
        if n == kill_turn:
            threading.Timer(kill_in, os.kill, (os.getpid(), signal.SIGKILL)).start()
        began = time.monotonic()
        if os.environ.get("LANGGRAPH_REQUESTS_ASYNC"):  # the program awaits ainvoke
            result = asyncio.run(_ainvoke(graph, text, config))
        else:
            result = graph.invoke({"messages": [("user", text)]}, config)
            while "__interrupt__" in result:  # a human approves (kind "approval")
                result = graph.invoke(Command(resume="yes"), config)
        seconds.append(time.monotonic() - began)
        answers.append(_text(result["messages"][-1]))
    if kill_turn == -1:
        os.kill(os.getpid(), signal.SIGKILL)
    Path(out).write_text(json.dumps({"answers": answers, "seconds": seconds}))


# -- the trials ---------------------------------------------------------------------


@dataclass
class Counts:
    """One scenario's trials."""

    trials: int = 0
    kills: int = 0
    repeated: int = 0
    #: Calls paid again including those the kill caught after they answered and
    #: before ``step()`` recorded them (in flight: run again by design).
    paid_twice: int = 0
    differing: int = 0
    #: ``copies``: calls beyond an uninterrupted run's in the trials with no kill.
    unkilled_extra: int = 0
    errors: list[str] = field(default_factory=list)

    def row(self, name: str) -> str:
        return (
            f"| {name} | {self.trials} | {self.kills} | {self.repeated} | {self.paid_twice} "
            f"| {self.differing} | {len(self.errors)} |"
        )


def _fork(target: Callable[[], None], side: str) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.environ["LANGGRAPH_REQUESTS_SIDE"] = side
            target()
        except BaseException as exc:
            _log(side + ".err", f"{type(exc).__name__}: {exc}")
            code = 1
        os._exit(code)
    return pid


#: What the forking process imports besides this module: what an attempt imports at its
#: first run (the journal's SQLite modules, LangGraph's prebuilt agent, LangChain's
#: tracers), so that each attempt does not import them again.
PRELOAD = (
    "langchain_core.messages.block_translators.langchain_v0",
    "langchain_core.tracers.context",
    "langchain_core.tracers.run_collector",
    "langchain_core.tracers.stdout",
    "langgraph.prebuilt",
    "letitloop.stores.sqlite.compact_migration",
    "letitloop.stores.sqlite.migration_sql",
    "letitloop.run.otel",
    "letitloop.stores.sqlite.schema_file",
    "letitloop.stores.sqlite.keychecks",
    "letitloop.stores.sqlite.markers",
    "letitloop.stores.sqlite.storage",
)

#: The forking process: a fresh interpreter (``argv[1]``: the repository) that imported
#: this module and PRELOAD and opened nothing. Per request line on stdin, ``{"wait":
#: PID}`` replies the exit status of its child PID (negative: the signal), any other
#: (``side``, ``env``, ``program``: program's arguments) forks a child that runs
#: ``program`` with that environment and replies its pid. What the imports made is moved
#: out of the collector's sight first (``gc.freeze``, as tests/preloaded.py does): a
#: child's collections then skip it instead of touching, and so copying, its pages.
FORKER = r"""
import gc, json, os, sys
sys.path.insert(0, sys.argv[1])
import benchmarks.langgraph_requests as lr
for name in lr.PRELOAD:
    __import__(name)
gc.collect()
gc.freeze()
for line in sys.stdin:
    request = json.loads(line)
    if "wait" in request:
        reply = lr._reaped(request["wait"])
    else:
        os.environ.clear()
        os.environ.update(request["env"])
        reply = lr._fork(lambda: lr.program(*request["program"]), request["side"])
    sys.stdout.write(f"{reply}\n")
    sys.stdout.flush()
"""

_forker: list[subprocess.Popen[str]] = []
_forker_lock = threading.Lock()


def _ask(request: dict[str, Any]) -> int:
    """One exchange with the forking process, started on first use and stopped at exit.

    The attempts are forked from it, not from this process: a fork copies its parent's
    page tables, and a test worker that imported every framework copies about three
    times those of an interpreter that imported LangGraph (about 15 ms of system CPU an
    attempt, over hundreds of attempts); they are real processes all the same, and
    SIGKILL them as before.
    """
    with _forker_lock:
        if not _forker or _forker[0].poll() is not None:
            _forker[:] = [
                subprocess.Popen(
                    [sys.executable, "-c", FORKER, str(Path(__file__).resolve().parent.parent)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            ]
            atexit.register(stop_forker)
        forker = _forker[0]
        assert forker.stdin is not None and forker.stdout is not None
        forker.stdin.write(json.dumps(request) + "\n")
        forker.stdin.flush()
        reply = forker.stdout.readline()
    if not reply:
        raise RuntimeError(f"the forking process ended (exit {forker.wait()})")
    return int(reply)


def stop_forker() -> None:
    """Stop the forking process, if it was started (its children have ended)."""
    with _forker_lock:
        while _forker:
            forker = _forker.pop()
            if forker.stdin is not None:
                forker.stdin.close()
            forker.wait(60)


def _start(side: str, *program_args: Any) -> int:
    """Fork a child of the forking process that runs ``program(*program_args)`` with this
    process's environment and ``side`` as its side file: its pid."""
    return _ask({"side": side, "env": dict(os.environ), "program": program_args})


def _reaped(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _wait(pid: int) -> int:
    """The exit status of an attempt :func:`_start` started (negative: the signal)."""
    return _ask({"wait": pid})


def _lines(side: str) -> list[tuple[str, str]]:
    if not os.path.exists(side):
        return []
    return [tuple(line.split(" ", 1)) for line in Path(side).read_text().splitlines()]  # type: ignore[misc]


def repeated(side: str) -> int:
    """Returned calls started again: a ``start K`` after ``returned K`` (the ``step()``
    around it had returned), or, in a graph with no ``step()`` (``react``), after ``end K``."""
    lines = _lines(side)
    mark = "returned" if any(event == "returned" for event, _ in lines) else "end"
    return _again(lines, mark)


def paid_twice(side: str) -> int:
    """Calls paid again: a ``start K`` after an ``end K``. Beyond :func:`repeated`, a kill
    after the call answered and before ``step()`` recorded it (the call was in flight)."""
    return _again(_lines(side), "end")


def _again(lines: list[tuple[str, str]], mark: str) -> int:
    done: set[str] = set()
    count = 0
    for event, key in lines:
        if event == "start" and key in done:
            count += 1
        elif event == mark:
            done.add(key)
    return count


def starts(side: str) -> int:
    return sum(1 for event, _ in _lines(side) if event == "start")


class Trials:
    """Runs scenarios on one journal file in ``folder``, forking a child per attempt."""

    def __init__(self, folder: Path, kind: str, rng: random.Random) -> None:
        self.folder, self.kind, self.rng = folder, kind, rng
        self.db = str(folder / "journal.db")
        self.n = 0
        self.seconds: list[float] = []

    def _attempt(
        self, turns: list[str], side: str, kill_turn: int = -2, kill_in: float = 0.0
    ) -> tuple[int, Any]:
        out = f"{side}.{self.rng.random()}.out"
        pid = _start(side, self.kind, self.db, self._thread, turns, out, kill_turn, kill_in)
        code = _wait(pid)
        self.seconds = json.loads(Path(out).read_text())["seconds"] if code == 0 else []
        answer = json.loads(Path(out).read_text())["answers"] if code == 0 else None
        return code, answer

    def _new(self, name: str) -> str:
        self.n += 1
        # Unique in the file: Trials sharing a folder never meet each other's threads.
        self._thread = f"{self.kind}-{name}-{self.n}-{id(self):x}"
        return str(self.folder / f"{self._thread}.side")

    def reference(self, turns: list[str]) -> tuple[list[str], float, int]:
        """An uninterrupted run: its answers, the last turn's seconds, its calls."""
        side = self._new("reference")
        code, answer = self._attempt(turns, side)
        assert code == 0, Path(side + ".err").read_text() if os.path.exists(side + ".err") else code
        return answer, self.seconds[-1], starts(side)

    def returned(self, trials: int) -> Counts:
        got = Counts()
        want, _, _ = self.reference(["book a room"])
        for _ in range(trials):
            side = self._new("returned")
            code, _ = self._attempt(["book a room"], side, kill_turn=-1)
            got.kills += code == -signal.SIGKILL
            paid = starts(side)
            code, answer = self._attempt(["book a room"], side)
            self._count(got, side, code, answer, want)
            if starts(side) != paid:
                got.repeated += starts(side) - paid
                got.paid_twice += starts(side) - paid
        return got

    def turns(self, trials: int) -> Counts:
        got = Counts()
        turns = ["find a flight", "book a hotel"]
        want, seconds, _ = self.reference(turns)
        for _ in range(trials):
            side = self._new("turns")
            code, _ = self._attempt(turns, side, kill_turn=1, kill_in=self.rng.uniform(0, seconds))
            got.kills += code == -signal.SIGKILL
            code, answer = self._attempt(turns, side)
            self._count(got, side, code, answer, want)
        return got

    def changed(self, trials: int) -> Counts:
        got = Counts()
        want, seconds, _ = self.reference(["book a room by the sea"])
        for _ in range(trials):
            side = self._new("changed")
            code, _ = self._attempt(
                ["book a room"], side, kill_turn=0, kill_in=self.rng.uniform(0, seconds)
            )
            got.kills += code == -signal.SIGKILL
            code, answer = self._attempt(["book a room by the sea"], side)
            self._count(got, side, code, answer, want)
        return got

    def copies(self, trials: int) -> Counts:
        got = Counts()
        turns = ["book a table"]
        want, seconds, calls = self.reference(turns)
        for n in range(trials):
            side = self._new("copies")
            outs = [f"{side}.{i}.out" for i in range(2)]
            kill = n % 2 == 1
            pids = [_start(side, self.kind, self.db, self._thread, turns, o, -2, 0.0) for o in outs]
            if kill:
                time.sleep(self.rng.uniform(0, seconds))
                os.kill(pids[0], signal.SIGKILL)
            codes = [_wait(p) for p in pids]
            got.trials += 1
            got.kills += codes[0] == -signal.SIGKILL
            got.repeated += repeated(side)
            got.paid_twice += paid_twice(side)
            if not kill and starts(side) != calls:
                got.repeated += starts(side) - calls
                got.unkilled_extra += starts(side) - calls
            for i, code in enumerate(codes):
                if code == -signal.SIGKILL and kill and i == 0:
                    continue
                if code != 0:
                    got.errors.append(self._error(side, code))
                elif json.loads(Path(outs[i]).read_text())["answers"] != want:
                    got.differing += 1
        return got

    def _count(self, got: Counts, side: str, code: int, answer: Any, want: Any) -> None:
        got.trials += 1
        got.repeated += repeated(side)
        got.paid_twice += paid_twice(side)
        if code != 0:
            got.errors.append(self._error(side, code))
        elif answer != want:
            got.differing += 1

    def _error(self, side: str, code: int) -> str:
        err = Path(side + ".err")
        return f"{self._thread}: exit {code}: {err.read_text()[-500:] if err.exists() else ''}"


def run(folder: Path, kind: str, scenario: str, trials: int, rng: random.Random) -> Counts:
    return getattr(Trials(folder, kind, rng), scenario)(trials)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--graphs", default=",".join(GRAPHS))
    parser.add_argument("--seed", default="requests")
    args = parser.parse_args(argv)
    print(
        "| graph / scenario | trials | kills | returned calls repeated | calls paid twice "
        "| differing answers | resume errors |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind in args.graphs.split(","):
        for scenario in args.scenarios.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                got = run(
                    Path(tmp),
                    kind,
                    scenario,
                    args.trials,
                    random.Random(f"{args.seed}-{kind}-{scenario}"),
                )
            print(got.row(f"{kind} / {scenario}"), flush=True)
            for e in got.errors[:3]:
                print("   ", e)


if __name__ == "__main__":
    main()
