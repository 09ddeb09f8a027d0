"""LlamaIndex agents (AgentWorkflow with a handoff and output_cls, FunctionAgent, ReActAgent)
with ``runtime=LetItLoopRuntime()``, killed with SIGKILL at random calls and run again
(tests/llamaindex_agents.py is the script; its model and tools count their executions
in a side file, not in the journal).

Each trial draws one or two kill points at random (seeded) among the model and
tool calls an uninterrupted run makes, in their order: the child kills itself
when the call starts, then the next attempt runs, killed at the next point, and
a last attempt runs to the end.
"""

# xdist: one worker (its in-process runs and the forked trials ran apart in the suite)

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core.agent.workflow")

import llamaindex_agents
from agent_kills import (
    lil_show,
    reran_after_finishing,
    reran_without_being_in_flight,
    run_attempts,
    run_here,
)
from preloaded import Preloaded
from trial_count import TRIALS

SCRIPT = Path(__file__).resolve().parent / "llamaindex_agents.py"
#: A shape's 20 trials (about 50 processes) take a minute or two of a shared 2-core
#: machine, counted in its first test's setup: more than the suite's 120 s default,
#: which would stop them half-way through a forked child's run.
pytestmark = pytest.mark.timeout(900)


@dataclass
class Trials:
    """What the random trials of one shape did."""

    reference: Any
    calls: list[str]
    repeated: list[str] = field(default_factory=list)
    not_in_flight: list[str] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    kills: int = 0


@pytest.fixture(scope="module")
def sdk() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported llama-index-core's agents, the
    adapter and what a run imports at its first call, and loaded the token counter's
    tokenizer (tiktoken's tables: about 0.25 s of CPU that each child loaded again)."""
    with Preloaded(
        "llama_index.core.agent.workflow",
        "letitloop.adapters.llamaindex",
        "workflows.representation",
        "workflows.representation.validate",
        "workflows.runtime.verbose",
        with_letitloop=True,
        warm="from llama_index.core.utils import get_tokenizer; get_tokenizer()",
    ) as preloaded:
        yield preloaded


def trials(folder: Path, mode: str, sdk: Preloaded) -> Trials:
    reference = run_here(
        lambda db: llamaindex_agents.main(mode, db),
        llamaindex_agents.WHERE,
        folder / "ref.db",
        folder / "ref.txt",
    )
    calls = [what for event, what in reference.lines[0] if event == "start"]
    got = Trials(reference, calls)
    rng = random.Random(f"llamaindex-{mode}")
    for n in range(TRIALS):
        kills = sorted(rng.sample(range(len(calls)), rng.choice([1, 2])))
        where = folder / f"trial{n}"
        where.mkdir()
        try:
            killed = run_attempts(
                SCRIPT, mode, where / "j.db", where / "side.txt", [calls[k] for k in kills], sdk
            )
        except AssertionError as exc:
            got.errors.append(f"trial {n} (kills {kills}): {exc}")
            continue
        got.kills += killed.returncodes.count(-9)
        if any(code not in (0, -9) for code in killed.returncodes):
            got.errors.append(f"trial {n}: exit statuses {killed.returncodes}")
        got.repeated += [f"trial {n}: {w}" for w in reran_after_finishing(killed)]
        got.not_in_flight += [f"trial {n}: {w}" for w in reran_without_being_in_flight(killed)]
        if killed.answer != reference.answer:
            got.differing.append(f"trial {n}: {killed.answer} != {reference.answer}")
    return got


@pytest.fixture(scope="module", params=["team", "function", "react"])
def shape(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, sdk: Preloaded
) -> Trials:
    return trials(tmp_path_factory.mktemp(f"llama-{request.param}"), request.param, sdk)


class TestAnAgentKilledAtRandomCallsAndRunAgain:
    def test_no_call_that_finished_ran_again(self, shape: Trials) -> None:
        assert shape.repeated == []
        assert shape.not_in_flight == []

    def test_every_answer_is_the_uninterrupted_runs(self, shape: Trials) -> None:
        assert shape.differing == []
        assert shape.reference.answer["type"] == "AgentOutput"

    def test_every_run_resumed_without_an_error(self, shape: Trials) -> None:
        assert shape.errors == []
        assert shape.kills >= TRIALS  # each trial killed at least once


class TestTheTeam:
    def test_it_handed_off_and_gave_its_structured_output(self, shape: Trials) -> None:
        answer = shape.reference.answer
        if "handoff" in answer["tools"]:
            assert answer["structured"] == {"city": "Oslo", "total": 5}
            assert "model writer report" in shape.calls


class TestAFinishedRunStartedAgain:
    def test_it_returns_an_agent_output_and_calls_nothing(self, tmp_path: Path) -> None:
        db, side = tmp_path / "j.db", tmp_path / "side.txt"
        first = run_here(
            lambda d: llamaindex_agents.main("team", d), llamaindex_agents.WHERE, db, side
        )
        again = run_here(
            lambda d: llamaindex_agents.main("team", d), llamaindex_agents.WHERE, db, side
        )
        assert again.answer == first.answer
        assert again.answer["type"] == "AgentOutput"
        assert again.lines == [[]]  # nothing ran the second time


class TestASingleFunctionAgent:
    def test_its_runtime_argument_journals_its_calls(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        run_here(
            lambda d: llamaindex_agents.main("function", d),
            llamaindex_agents.WHERE,
            db,
            tmp_path / "side.txt",
        )
        keys = [row["key"] for row in lil_show(db, "llama-function")["rows"]]
        assert any(k.startswith("FunctionAgent.") and "step_result:call_tool" in k for k in keys)


class TestUsage:
    def test_each_model_call_reports_its_tokens_and_usage_works_inside_the_llm(
        self, tmp_path: Path
    ) -> None:
        import asyncio

        from llama_index.core.agent.workflow import FunctionAgent
        from llama_index.core.base.llms.types import ChatResponse
        from llama_index.core.llms import ChatMessage
        from llama_index.core.llms.mock import MockFunctionCallingLLM

        from letitloop import Journal, usage
        from letitloop.adapters.llamaindex import LetItLoopRuntime

        class CountingLLM(MockFunctionCallingLLM):
            """Counts tokens as LlamaIndex's OpenAI integration does (additional_kwargs)."""

            async def astream_chat(self, messages: Any, **kwargs: Any) -> Any:
                usage(cost=0.25)  # the program's own report, inside the call
                chunk = ChatResponse(
                    message=ChatMessage(role="assistant", content="Oslo is in Norway"),
                    delta="Oslo is in Norway",
                    additional_kwargs={"prompt_tokens": 12, "completion_tokens": 5},
                )

                async def stream() -> Any:
                    yield chunk

                return stream()

        async def main() -> Any:
            agent = FunctionAgent(llm=CountingLLM(), runtime=LetItLoopRuntime())
            async with Journal("usage", run="u", path=tmp_path / "j.db"):
                return await agent.run(user_msg="Where is Oslo?")

        assert str(asyncio.run(main())) == "Oslo is in Norway"
        rows = [r for r in lil_show(tmp_path / "j.db", "usage")["rows"] if ".llm:" in r["key"]]
        assert len(rows) == 1
        spent = json.dumps(rows[0])
        assert '"input_tokens": 12' in spent and '"output_tokens": 5' in spent, rows[0]
        assert '"cost": 0.25' in spent


class TestAMemoryTheRuntimeCannotRebuild:
    def test_it_is_refused_with_an_error_saying_what_to_do(self, tmp_path: Path) -> None:
        import asyncio

        from llama_index.core.agent.workflow import FunctionAgent
        from llama_index.core.llms.mock import MockFunctionCallingLLM
        from llama_index.core.memory import ChatMemoryBuffer
        from llama_index.core.storage.chat_store import SimpleChatStore

        from letitloop import Journal
        from letitloop.adapters.llamaindex import LetItLoopRuntime
        from letitloop.errors import EncodeError

        class RemoteChatStore(SimpleChatStore):
            """A chat store of the user's own (kept elsewhere in a real program)."""

        async def main() -> Any:
            agent = FunctionAgent(llm=MockFunctionCallingLLM(), runtime=LetItLoopRuntime())
            memory = ChatMemoryBuffer.from_defaults(chat_store=RemoteChatStore())
            async with Journal("memory", run="m", path=tmp_path / "j.db"):
                return await agent.run("hello", memory=memory)

        with pytest.raises(EncodeError) as refused:
            asyncio.run(main())
        assert "RemoteChatStore" in str(refused.value)
        assert "ChatMemoryBuffer.from_defaults" in str(refused.value)
