"""A LangGraph ``interrupt()`` answered by ``lil send`` (issue 48): ``wait_for_answers``.

The user's program (``tests/langgraph_answers.py``) asks its request, then waits for the
answers with ``stop_after=0``: it stops (exit 75, one line), ``lil send`` answers, and the
program run again continues. Children are forked by ``tests/preloaded.py``; the side file,
not the journal, says which calls were paid.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.graph", reason="LangGraph is not installed (letitloop[langgraph])")

if not hasattr(os, "fork"):  # pragma: no cover
    pytest.skip("the trials fork their children", allow_module_level=True)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from helpers import LIL_ENTRY  # noqa: E402
from preloaded import LANGGRAPH_AGENTS, Preloaded  # noqa: E402
from trial_count import TRIALS  # noqa: E402

import letitloop  # noqa: E402

#: ``python tests/langgraph_answers.py ARGS`` (the program) as a child of the forker runs
#: it (tests/preloaded_main.py): ``forker.run(*PROGRAM, ARGS)``.
PROGRAM = (HERE / "preloaded_main.py", "langgraph_answers")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def forker() -> Iterator[Preloaded]:
    """Forks the program's runs and ``lil``'s: LangGraph, the adapter, what a run imports
    at its first call (LangChain's tracers, the durable model's streaming), ``lil``'s
    commands, and the program's module (its definitions made once, not in each child)."""
    modules = (
        *LANGGRAPH_AGENTS,  # LangGraph's agents and what their run imports at its first call
        "letitloop.primitives.waits",
        "letitloop.run.retry",
        "letitloop.cli",
        "pkgutil",
    )
    warm = f"import sys\nsys.path.append({str(HERE)!r})\nimport langgraph_answers\n"
    with Preloaded(*modules, with_letitloop=True, warm=warm) as p:
        yield p


def _lil(forker: Preloaded, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``lil --db DB ARGS`` (``python -m letitloop``) in a child of the forker: what it
    prints and writes is what these tests check, not the entry point's start."""
    return forker.run(LIL_ENTRY, "--db", str(db), *args)


def _asked(stderr: str) -> str:
    """The interrupt id the stop line names."""
    found = re.search(r"'interrupt:([0-9a-f]{32})'", stderr)
    assert found, stderr
    return found.group(1)


def _said(stderr: str) -> list[str]:
    """The program's stderr lines but LangGraph's warning that ``create_react_agent`` moved
    to ``langchain.agents`` (its line and the source line it quotes)."""
    lines = stderr.strip().splitlines()
    moved = {i for i, x in enumerate(lines) if "LangGraphDeprecatedSinceV10" in x}
    return [x for i, x in enumerate(lines) if i not in moved and i - 1 not in moved]


def _starts(side: Path, what: str) -> int:
    return side.read_text().splitlines().count(f"start {what}") if side.exists() else 0


def _waiting(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT goal, status FROM runs WHERE goal = 'langgraph:answers'"
        ).fetchall()


class TestAnInterruptAnsweredByLilSend:
    def test_the_program_stops_with_one_line_saying_what_it_waits_for_and_how_to_answer(
        self, forker: Preloaded, tmp_path: Path
    ) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side"
        stopped = forker.run(*PROGRAM, str(db), "t1", str(side))
        assert stopped.returncode == 75, stopped.stderr
        lines = stopped.stderr.strip().splitlines()
        assert len(lines) == 1, stopped.stderr
        asked = _asked(lines[0])
        for words in ("stopped to wait for", "book room 12", "thread 't1'", "lil send "):
            assert words in lines[0], lines[0]
        assert f"interrupt:{asked} true" in lines[0]
        assert _starts(side, "book 12") == 0
        assert _waiting(db) == [("langgraph:answers", "waiting")]

    def test_an_answer_naming_another_interrupt_is_refused_and_the_run_is_untouched(
        self, forker: Preloaded, tmp_path: Path
    ) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side"
        asked = _asked(forker.run(*PROGRAM, str(db), "t1", str(side)).stderr)
        other = "0" * 32
        refused = _lil(forker, db, "send", "langgraph:answers", f"interrupt:{other}", "true")
        assert refused.returncode != 0
        assert f"interrupt:{asked}" in refused.stderr and "not waiting for" in refused.stderr
        assert _waiting(db) == [("langgraph:answers", "waiting")]
        sent = _lil(forker, db, "send", "langgraph:answers", f"interrupt:{asked}", "true")
        assert sent.returncode == 0, sent.stderr
        again = _lil(forker, db, "send", "langgraph:answers", f"interrupt:{asked}", "false")
        assert again.returncode != 0  # one answer per interrupt
        done = forker.run(*PROGRAM, str(db), "t1", str(side))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["answer"] == "room 12 booked"
        assert _starts(side, "book 12") == 1
        # Run again: the same request and the same answer, nothing paid.
        rerun = forker.run(*PROGRAM, str(db), "t1", str(side))
        assert rerun.returncode == 0 and json.loads(rerun.stdout) == json.loads(done.stdout)
        assert _starts(side, "book 12") == 1


#: Per graph: the environment that picks it, the wait for a call cut short, the goal of
#: the run that waits: ``approved_step`` in a durable node, or a durable ToolNode's tool
#: that asked with ``interrupt()`` (no ``approved_step``).
GRAPHS = {
    "node": ({}, "book/again:book", "langgraph:approve_and_book"),
    "tool": ({"GRAPH": "tool"}, "tool:call-book/again:tool:call-book", "langgraph:tools"),
    # create_agent with durable_middleware(): the same tool, the same steps.
    "agent": ({"GRAPH": "agent"}, "tool:call-book/again:tool:call-book", "langgraph:tools"),
}


class TestKilledInsideTheApprovedCall:
    @pytest.mark.parametrize("graph", sorted(GRAPHS))
    @pytest.mark.parametrize("again", [False, True])
    def test_it_is_not_run_again_unless_a_person_says_so(
        self, forker: Preloaded, tmp_path: Path, again: bool, graph: str
    ) -> None:
        extra, wait, goal = GRAPHS[graph]
        env = {**os.environ, **extra}
        db, side = tmp_path / "j.db", tmp_path / "side"
        asked = _asked(forker.run(*PROGRAM, str(db), "t1", str(side), env=env).stderr)
        first = _lil(forker, db, "send", "langgraph:answers", f"interrupt:{asked}", "true")
        assert first.returncode == 0, first.stderr
        slow = {**env, "SLOW": "1"}
        child = forker.start(*PROGRAM, str(db), "t1", str(side), env=slow)
        while _starts(side, "book 12") == 0:
            assert child.running(), child.wait().stderr
            time.sleep(0.001)
        os.kill(child.pid, signal.SIGKILL)  # inside the booking
        assert child.wait().returncode == -signal.SIGKILL
        stopped = forker.run(*PROGRAM, str(db), "t1", str(side), env=env)
        assert stopped.returncode == 75, stopped.stderr
        (line,) = _said(stopped.stderr)
        assert f"'{wait}'" in line and "cut short" in line and "lil send " in line, line
        assert _starts(side, "book 12") == 1  # not run again on its own
        with sqlite3.connect(db) as conn:
            (run,) = conn.execute(
                "SELECT id FROM runs WHERE goal = ? AND status = 'waiting'", (goal,)
            ).fetchone()
        sent = _lil(forker, db, "send", run, wait, "true" if again else "false")
        assert sent.returncode == 0, sent.stderr
        done = forker.run(*PROGRAM, str(db), "t1", str(side), env=env)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)["answer"]
        if again:
            assert answer == "room 12 booked"
            assert _starts(side, "book 12") == 2
        else:
            assert "may have happened, and it was not run again" in answer, answer
            assert _starts(side, "book 12") == 1


class TestKilledAfterTheAnswer:
    @pytest.mark.parametrize("graph", ["node", "tool"])  # agent: as tool, checked above
    def test_the_approved_call_is_not_paid_twice(
        self, forker: Preloaded, tmp_path: Path, graph: str
    ) -> None:
        """The answered program SIGKILLed at a random moment, then run again."""
        extra, wait, _ = GRAPHS[graph]
        env = {**os.environ, **extra}
        db = tmp_path / "j.db"
        rng = random.Random("answers")
        ref_side = tmp_path / "reference.side"
        asked = _asked(forker.run(*PROGRAM, str(db), "reference", str(ref_side), env=env).stderr)
        letitloop.send("langgraph:answers", f"interrupt:{asked}", True, path=str(db))
        began = time.monotonic()
        assert forker.run(*PROGRAM, str(db), "reference", str(ref_side), env=env).returncode == 0
        seconds = time.monotonic() - began
        kills = repeated = in_flight = errors = differing = asked_again = in_doubt = 0
        for i in range(TRIALS):
            side, thread = tmp_path / f"{i}.side", f"trial-{i}"
            ended = False
            asked = _asked(forker.run(*PROGRAM, str(db), thread, str(side), env=env).stderr)
            letitloop.send("langgraph:answers", f"interrupt:{asked}", True, path=str(db))
            child = forker.start(*PROGRAM, str(db), thread, str(side), env=env)
            time.sleep(rng.uniform(0, seconds))
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            kills += child.wait().returncode == -signal.SIGKILL
            done = forker.run(*PROGRAM, str(db), thread, str(side), env=env)
            if done.returncode == 75 and wait in done.stderr:
                # Killed inside the booking: the person checks (the side file says whether
                # it ended) and answers; the program run again.
                asked_again += 1
                ended = "end book 12" in side.read_text().splitlines()
                run = re.search(r"lil send (\S+) ", done.stderr).group(1)  # type: ignore[union-attr]
                letitloop.send(run, wait, not ended, path=str(db))
                done = forker.run(*PROGRAM, str(db), thread, str(side), env=env)
                in_doubt += ended
            lines = side.read_text().splitlines()
            starts = lines.count("start book 12")
            returned_then_started = (
                any(
                    line == "start book 12" for line in lines[lines.index("returned book 12") + 1 :]
                )
                if "returned book 12" in lines[:-1]
                else False
            )
            repeated += returned_then_started
            in_flight += max(starts - 1, 0) - returned_then_started
            if done.returncode != 0:
                errors += 1
            elif json.loads(done.stdout)["answer"] != "room 12 booked" and not (
                ended and "may have happened" in json.loads(done.stdout)["answer"]
            ):
                differing += 1
        print(
            f"| {graph}: answered, killed / rerun | {TRIALS} | {kills} | {repeated} | {in_flight} "
            f"| {asked_again} ({in_doubt} ended) | {differing} | {errors} |",
            file=sys.stderr,
        )
        assert (repeated, differing, errors) == (0, 0, 0)
        assert kills >= TRIALS // 4


class TestAToolThatAsksResumedUnderAinvoke:
    @pytest.mark.parametrize("graph", ["tool", "agent"])  # agent: create_agent's middleware
    def test_what_follows_the_answer_runs_inside_its_marker(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, graph: str
    ) -> None:
        # The async path of the durable ToolNode (awrap, approved.run_once), in process:
        # the kill trials above run the sync one.
        import asyncio

        import langgraph_answers as program
        from langgraph.types import Command

        monkeypatch.setenv("GRAPH", graph)
        monkeypatch.setenv("SIDE", str(tmp_path / "side"))
        agent = program.build(str(tmp_path / "j.db"))
        config: Any = {"configurable": {"thread_id": "t1"}}

        async def ask() -> Any:
            asked = await agent.ainvoke({"messages": [("user", "book a room")]}, config)
            assert "__interrupt__" in asked
            return await agent.ainvoke(Command(resume=True), config)

        done = asyncio.run(ask())
        assert done["messages"][-1].content == "room 12 booked"
        with sqlite3.connect(tmp_path / "j.db") as conn:
            (table,) = conn.execute(
                "SELECT journal_table FROM goals WHERE goal = 'langgraph:tools'"
            ).fetchone()
            rows = conn.execute(f"SELECT key, kind, status FROM [{table}]").fetchall()
        assert ("approved:tool:call-book", "marker", "done") in rows, rows
        assert _starts(tmp_path / "side", "book 12") == 1
