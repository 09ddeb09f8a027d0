"""``Runner.run_streamed`` with a durable agent, killed mid-turn, against a fake OpenAI server.

The agent's model is the SDK's ``OpenAIChatCompletionsModel`` pointed at the fake
OpenAI-compatible server (tests/openai_server.py: it streams, and bills each
output token as it sends it). Turn 1 streams an answer that ends with a tool
call; the tool runs; turn 2 streams the answer. The program (a real child,
forked from an interpreter that imported the SDK) SIGKILLs itself in the middle
of turn 2, then runs again. The server's bills and a side file the tool writes
count what was paid and what ran, outside the journal; the test reads the turn's
journaled stream from its own process (another than the writer's). The journal is
a file, then a PostgreSQL database. Last, a Responses API model's turn killed
mid-answer restarts (the SDK asks for no background response to re-attach to).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_kills import for_agents
from helpers import write_script
from openai_server import LENGTH, TOOL_ARGS, FakeOpenAI, answer
from preloaded import Preloaded

pytest.importorskip("agents")
pytest.importorskip("uvicorn")

PROGRAM = """
    import asyncio, json, os, signal, sys

    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
    from agents.models.openai_responses import OpenAIResponsesModel
    from openai import AsyncOpenAI
    from openai.types.responses import ResponseTextDeltaEvent

    from letitloop import Journal
    from letitloop.adapters.openai_agents import durable_agent
    from letitloop.streams import calls

    DB, URL, LOG, API = sys.argv[1:]
    calls.FLUSH_EVERY = 4  # a batch every 4 chunks: a kill mid-turn leaves some journaled
    KILL_AT = int(os.environ.get("KILL_AT", "0"))
    set_tracing_disabled(True)


    @function_tool
    def get_weather(city: str, days: int) -> str:
        with open(LOG, "a") as f:
            f.write(f"tool {city} {days}\\n")
        return f"snow in {city} for {days} days"


    client = AsyncOpenAI(base_url=URL, api_key="k", max_retries=0)
    if API == "chat":
        model = OpenAIChatCompletionsModel("fake", client)
        agent = durable_agent(Agent(name="trip", model=model, tools=[get_weather]))
    else:  # the Responses API, text only
        agent = durable_agent(Agent(name="trip", model=OpenAIResponsesModel("fake", client)))


    async def main():
        async with Journal("trip", run="paris", path=DB) as j:
            result = Runner.run_streamed(agent, "TOOL What is Paris like?")
            n = 0
            async for event in result.stream_events():
                if isinstance(getattr(event, "data", None), ResponseTextDeltaEvent):
                    n += 1
                    if j.attempt == 1 and n == KILL_AT:
                        os.kill(os.getpid(), signal.SIGKILL)
            print(json.dumps({"output": result.final_output}))


    asyncio.run(main())
"""

PROMPT = "TOOL What is Paris like?"
#: Text deltas the program gets before it kills itself: turn 1's, then a quarter of turn 2's.
#: The SDK's task that reads the model's stream (and journals it, a batch every 4 chunks)
#: runs ahead of the program's loop that counts them, by up to a dozen chunks on a loaded
#: machine: the kill then finds more of turn 2 journaled, never all of it.
KILL_AT = LENGTH + LENGTH // 4


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def sdk() -> Iterator[Preloaded]:
    with for_agents("letitloop.streams", "agents.models.openai_chatcompletions") as p:
        yield p


@pytest.fixture(scope="module", params=["file", "postgres"])
def killed(
    request: pytest.FixtureRequest,
    sdk: Preloaded,
    server: FakeOpenAI,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """The streamed run killed in the middle of turn 2, then run again to its end; its
    journal a file, or on PostgreSQL."""
    folder = tmp_path_factory.mktemp("killed")
    script = write_script(folder, "program.py", PROGRAM)
    if request.param == "file":
        db = str(folder / "journal.db")
    else:
        import pg_server

        db = pg_server.location()
    args = (db, server.url, str(folder / "tools.log"), "chat")
    before = len(server.bills)
    first = sdk.run(script, *args, env={"KILL_AT": str(KILL_AT)})
    assert first.returncode == -signal.SIGKILL, first.stderr
    second = sdk.run(script, *args)
    assert second.returncode == 0, second.stderr
    from letitloop.streams import read, stream_keys

    keys = stream_keys("paris", path=db)
    return {
        "output": json.loads(second.stdout.splitlines()[-1])["output"],
        "bills": server.bills[before:],
        "requests": [r for r in server.requests if r.get("path") == "chat"][-3:],
        "tools": (folder / "tools.log").read_text().splitlines(),
        "keys": keys,
        "turn2": read("paris", keys[-1], path=db),
    }


class TestARunStreamedKilledMidTurn:
    def test_the_output_is_the_whole_answer_and_the_tool_ran_once(
        self, killed: dict[str, Any]
    ) -> None:
        assert killed["output"] == "".join(answer(PROMPT))
        assert killed["tools"] == ["tool Paris 3"]

    def test_the_finished_turn_is_not_paid_again_and_the_cut_one_only_its_rest(
        self, killed: dict[str, Any]
    ) -> None:
        bills = killed["bills"]
        assert len(bills) == 3  # turn 1, turn 2 (killed), turn 2's continuation
        assert bills[0]["output"] == LENGTH + len(TOOL_ARGS)
        continued = killed["requests"][-1]["messages"][-1]
        assert continued["role"] == "assistant"  # the journaled prefix, to be completed
        prefix = len(continued["content"].split())
        assert LENGTH // 4 - 4 < prefix < LENGTH  # what the model had sent when it was killed
        assert bills[2]["output"] == LENGTH - prefix

    def test_readers_see_the_turns_streams_and_the_continuation(
        self, killed: dict[str, Any]
    ) -> None:
        assert killed["keys"] == ["trip.model:1", "trip.model:2"]
        chunks = killed["turn2"]
        kinds = [c.kind for c in chunks]
        assert "reset" not in kinds and kinds[-1] == "end"
        assert {"recovery": "continue"} in [c.value for c in chunks if c.kind == "state"]
        assert "".join(c.text for c in chunks) == "".join(answer(PROMPT))
        assert [c.seq for c in chunks] == list(range(len(chunks)))


class TestAResponsesModelTurnKilledMidAnswer:
    def test_it_restarts_and_readers_are_told(
        self, sdk: Preloaded, server: FakeOpenAI, tmp_path: Path
    ) -> None:
        # The SDK asks for no background response: nothing to re-attach to, so a restart.
        from letitloop.streams import read

        script = write_script(tmp_path, "program.py", PROGRAM)
        args = (str(tmp_path / "journal.db"), server.url, str(tmp_path / "tools.log"), "responses")
        before = len(server.bills)
        first = sdk.run(script, *args, env={"KILL_AT": str(LENGTH // 2)})
        assert first.returncode == -signal.SIGKILL, first.stderr
        second = sdk.run(script, *args)
        assert second.returncode == 0, second.stderr
        output = json.loads(second.stdout.splitlines()[-1])["output"]
        bills = server.bills[before:]
        assert [b["kind"] for b in bills] == ["response", "response"]
        assert bills[1]["output"] == LENGTH  # the whole answer again
        chunks = read("paris", "trip.model:1", path=tmp_path / "journal.db")
        kinds = [c.kind for c in chunks]
        assert kinds.count("reset") == 1 and kinds[-1] == "end"
        after = chunks[kinds.index("reset") + 1 :]
        assert "".join(c.text for c in after) == output
        assert len(output.split()) == LENGTH
