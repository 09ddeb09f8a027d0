"""Journal files written by an earlier release resume with today's code (tests/golden/).

Each golden journal holds runs in flight, written by the release named in its
``.json`` (tests/golden/generate.py says how); a copy is resumed here the way
that release resumed it, each program in a process of its own (a child forked
from one interpreter that imported every program's framework once:
tests/preloaded.py), and must give the same results with the same calls: none
of what the file recorded is called again (DESIGN.md, "The file format is a public API").
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import lil_forked, run_forked, write_script
from preloaded import Preloaded

GOLDEN = Path(__file__).resolve().parent / "golden"
sys.path.insert(0, str(GOLDEN))

import generate  # noqa: E402

from letitloop.identity.step_names import NAMES, OLD_NAMES  # noqa: E402

NAMED = sorted(n for n in generate.GOLDENS if (GOLDEN / f"{n}.db").exists())
#: Goldens whose programs make no step the library names itself: LangGraph's adapter
#: records the user's steps and LangGraph's checkpoints only; the streams golden records the
#: user's sources.
NO_LIBRARY_STEPS = {"langgraph", "streams"}


def functions(db: Path) -> set[str]:
    """The function names ``db`` holds, read without writing anything beside it."""
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return {name for (name,) in conn.execute("SELECT name FROM functions")}
    finally:
        conn.close()


#: Goldens whose programs import no framework: letitloop's primitives alone.
NO_FRAMEWORK = {"primitives", "streams"}


@pytest.fixture(scope="module")
def programs() -> Iterator[dict[str, Preloaded]]:
    """Forks each golden program's process: from an interpreter that imported letitloop
    (``plain``) for :data:`NO_FRAMEWORK`'s, from one that imported every golden program's
    framework (generate.PROGRAM_IMPORTS) once for the adapters'; each starts at its first
    program. Fresh interpreters cost primitives' dozen programs about 0.1 s of CPU each."""
    with (
        Preloaded("letitloop", with_letitloop=True) as plain,
        Preloaded(*generate.PROGRAM_IMPORTS, with_letitloop=True) as frameworks,
    ):
        yield {"plain": plain, "frameworks": frameworks}


class TestAGoldenJournal:
    @pytest.mark.timeout(600)  # primitives.db: a dozen programs, each in a process of its own
    @pytest.mark.parametrize("golden", NAMED)
    def test_its_runs_in_flight_resume_with_nothing_called_again_and_the_same_results(
        self, golden: str, tmp_path: Path, programs: dict[str, Preloaded]
    ) -> None:
        db = generate.copy(golden, tmp_path)
        expected = json.loads((GOLDEN / f"{golden}.json").read_text())["resumes"]
        forker = programs["plain" if golden in NO_FRAMEWORK else "frameworks"]
        got = generate.resume(golden, db, tmp_path / "side", forker)
        for mine, theirs in zip(got, expected, strict=True):
            assert mine == theirs, f"{mine.get('stderr', '')}"

    @pytest.mark.parametrize("golden", sorted(set(NAMED) - NO_LIBRARY_STEPS))
    def test_it_holds_names_of_the_library_s_steps_it_recorded_then(self, golden: str) -> None:
        # What makes the test above one: rows recorded under the names files held before.
        held = functions(GOLDEN / f"{golden}.db")
        assert held & set(OLD_NAMES), held
        assert not held & NAMES


class TestTheGoldenProgramsRunToday:
    """A guard of tests/test_step_names.py, here to share :func:`programs`' forkers."""

    @pytest.mark.slow
    @pytest.mark.timeout(900)  # some 20 programs
    def test_programs_using_every_primitive_and_adapter_record_no_module_path_of_it(
        self, tmp_path: Path, programs: dict[str, Preloaded]
    ) -> None:
        seen: set[str] = set()
        for golden, spec in generate.GOLDENS.items():
            forker = programs["plain" if golden in NO_FRAMEWORK else "frameworks"]
            db, side = tmp_path / f"{golden}.db", tmp_path / f"{golden}.side"
            env = {**os.environ, "LETITLOOP_DB": str(db)}
            for i, (program, args) in enumerate(spec["resumes"]):  # uninterrupted, new file
                folder = tmp_path / f"{golden}-{i}"  # a scratch folder a run, as generate.run
                folder.mkdir()
                argv = [a.format(db=db, side=side) for a in args]
                done = forker.run(generate.PROGRAMS / program, *argv, cwd=folder, env=env)
                assert done.returncode in (0, 75), done.stderr[-2000:]
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)  # its WAL read too
            try:
                seen |= {name for (name,) in conn.execute("SELECT name FROM functions")}
            finally:
                conn.close()
        ours = {name for name in seen if name.startswith("letitloop")}
        assert all(name.startswith("letitloop:") for name in ours), ours
        assert ours <= NAMES
        # What these programs do not run: CrewAI (an environment of its own), the OpenAI
        # Agents SDK's and Pydantic AI's approvals, an async DSPy LM, the OpenAI Agents
        # session's pop and clear, DurableMCP.list_tools, lil demo; and the steps added
        # after the golden files were written (smolagents' code executions, LangGraph's
        # ToolNode calls, durable_model and approved_step; a queue's child runs), which
        # their own tests run.
        assert NAMES - ours == {
            "letitloop:crewai.item",
            "letitloop:crewai.llm",
            "letitloop:crewai.tool",
            "letitloop:demo.work",
            "letitloop:dspy.lm_async",
            "letitloop:mcp.tools",
            "letitloop:openai.chat",  # streams (tests/test_streams_killed.py)
            "letitloop:openai.responses",
            "letitloop:openai_agents.approved_tool",
            "letitloop:openai_agents.stream",  # tests/test_openai_agents_streams.py
            "letitloop:openai_agents.approvals",
            "letitloop:openai_agents.session.clear",
            "letitloop:openai_agents.session.pop",
            "letitloop:pydantic_ai.ask",
            "letitloop:pydantic_ai.stream",  # tests/test_pydantic_ai_token_streams.py
            "letitloop:smolagents.code",
            "letitloop:langgraph.tool",
            "letitloop:langgraph.model",
            "letitloop:langgraph.stream",  # tests/test_langgraph_streams.py
            "letitloop:langgraph.approved_call",
            "letitloop:queue.enqueue",
            "letitloop:queue.result",
        }


GOLDEN_FINGERPRINTS: dict[str, dict[str, str]] = json.loads(
    (GOLDEN / "fingerprints.json").read_text()
)["kinds"]


@pytest.fixture(scope="module")
def fingerprints_now() -> dict[str, dict[str, str]]:
    result: dict[str, dict[str, str]] = generate.fingerprints()
    return result


class TestTheGoldenFingerprints:
    """tests/golden/fingerprints.json: each kind of argument's fingerprint, as letitloop 0.1.0
    computed it (programs/fingerprint_kinds.py): recorded rows hold them, so a replay must
    compute them again, and a value refused then is refused now."""

    @pytest.mark.parametrize("kind", sorted(GOLDEN_FINGERPRINTS))
    def test_a_kind_of_argument_keeps_its_fingerprint(
        self, kind: str, fingerprints_now: dict[str, dict[str, str]]
    ) -> None:
        assert fingerprints_now[kind] == GOLDEN_FINGERPRINTS[kind]

    def test_no_kind_was_left_out(self, fingerprints_now: dict[str, dict[str, str]]) -> None:
        assert set(fingerprints_now) == set(GOLDEN_FINGERPRINTS)


class TestARunOfAGoldenJournalAndOneOfToday:
    def test_lil_diff_finds_no_other_function_where_a_library_step_was_renamed(
        self, tmp_path: Path
    ) -> None:
        # Run p of primitives.db holds its patch decision under letitloop.patches.decide;
        # the same steps made today record it as letitloop:patch.
        db = generate.copy("primitives", tmp_path)
        program = (
            "import sys\nfrom letitloop import Journal\n"
            "def fetch(name):\n    return name.upper()\n"
            "with Journal('patches', path=sys.argv[1], run='today') as j:\n"
            "    j.step('first', fetch, 'first')\n"
            "    j.step('second', fetch, 'second-new' if j.patched('new-path') else 'old')\n"
        )
        today = run_forked(write_script(tmp_path, "today.py", program), str(db))
        assert today.returncode == 0, today.stderr
        assert "letitloop:patch" in functions(db)
        done = lil_forked("--db", str(db), "diff", "p", "today", "--json")
        found = json.loads(done.stdout)["differences"]
        # Run p was killed before its second step: that is its one difference.
        assert [(d["key"], d["change"]) for d in found] == [("second", "added")], found
