"""A durable Pydantic AI agent's streamed model requests journaled token by token.

The agent (``run_stream``) streams a tool call, runs the tool, then streams its
answer word by word; the answer's stream holds after five words. The test reads
the run's stream from outside the child (``letitloop.streams.read``, another
process than the writer) until the five words are journaled, SIGKILLs the child,
and runs it again. The model function and the tool write what they did to a side
file, so what ran (and which words were generated) is counted outside the journal.

Then an ``OpenAIChatModel`` pointed at the fake OpenAI-compatible server
(tests/openai_server.py, which bills each output token as it sends it), killed by
its own event stream handler mid-answer: ``"auto"`` continues it, and the rerun
pays only the rest of the answer.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until, write_script
from openai_server import LENGTH, FakeOpenAI, answer
from preloaded import Child, Preloaded, for_sdk

pytest.importorskip("pydantic_ai.durable_exec")

AGENT = """
    import asyncio, json, os, sys, time

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolReturnPart
    from pydantic_ai.models.function import DeltaToolCall, FunctionModel

    from letitloop import Journal
    from letitloop.adapters.pydantic_ai import LetItLoopDurability

    LOG, RELEASED = os.environ["AGENT_LOG"], os.environ["AGENT_RELEASED"]
    DB, RECOVERY = sys.argv[1], sys.argv[2]
    WORDS = [f"w{i}" for i in range(10)]


    def note(line):
        with open(LOG, "a") as f:
            f.write(line + "\\n")


    async def stream(messages, info):
        done = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not done:
            note("start model 0")
            yield {0: DeltaToolCall(name="weather", json_args='{"city": ')}
            yield {0: DeltaToolCall(json_args='"Oslo"}')}
            note("end model 0")
            return
        last = messages[-1]  # the journaled prefix to continue, after a kill
        prefix = "".join(p.content for p in last.parts) if isinstance(last, ModelResponse) else ""
        start = sum(w in WORDS for w in prefix.split(" "))
        note(f"start model 1 from {start}")
        yield done[0] + ": " if not prefix else ""
        for i in range(start, len(WORDS)):
            while i == 5 and not os.path.exists(RELEASED):
                await asyncio.sleep(0.02)  # killed here by the test
            note(f"word {i}")
            yield WORDS[i] + " "
        note("end model 1")


    def respond(messages, info):
        raise AssertionError("run_stream streams")


    durable = LetItLoopDurability(stream_recovery=RECOVERY)
    model = FunctionModel(respond, stream_function=stream)
    agent = Agent(model, name="trip", capabilities=[durable])


    @agent.tool_plain
    def weather(city: str) -> str:
        note("start tool weather")
        note("end tool weather")
        return f"snow in {city}"


    async def main():
        async with Journal("trip", run="oslo", path=DB):
            async with agent.run_stream("What is Oslo like now?") as result:
                output = await result.get_output()
        print(json.dumps({"output": output}))


    asyncio.run(main())
"""

OPENAI_AGENT = """
    import asyncio, json, os, signal, sys

    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.messages import PartDeltaEvent, TextPartDelta
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from letitloop import Journal
    from letitloop.adapters.pydantic_ai import LetItLoopDurability
    from letitloop.streams import calls

    DB, URL = sys.argv[1:]
    KILL_AT = int(os.environ.get("KILL_AT", "0"))
    calls.FLUSH_EVERY = 4  # a batch every 4 chunks: a kill mid-answer leaves some journaled
    seen = 0


    async def handler(ctx, events):  # gets the tokens as they arrive
        global seen
        async for event in events:
            if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                seen += 1
                if seen == KILL_AT:
                    os.kill(os.getpid(), signal.SIGKILL)


    client = AsyncOpenAI(base_url=URL, api_key="k", max_retries=0)
    model = OpenAIChatModel("fake", provider=OpenAIProvider(openai_client=client))
    durable = LetItLoopDurability(event_stream_handler=handler)
    agent = Agent(model, name="story", capabilities=[durable])


    async def main():
        async with Journal("story", run="s", path=DB):
            async with agent.run_stream("Tell me a story") as result:
                output = await result.get_output()
        print(json.dumps({"output": output}))


    asyncio.run(main())
"""

ANSWER = "snow in Oslo: " + "".join(f"w{i} " for i in range(10))


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def run_agent(framework: Preloaded, folder: Path, recovery: str) -> Child:
    script = write_script(folder, "agent.py", AGENT)
    env = {"AGENT_LOG": str(folder / "calls.log"), "AGENT_RELEASED": str(folder / "go")}
    return framework.start(script, str(folder / "journal.db"), recovery, env={**os.environ, **env})


def answer_chunks(folder: Path) -> list[Any]:
    """The answer's stream as journaled, read from outside the writer."""
    from letitloop.errors import LetItLoopError
    from letitloop.streams import read, stream_keys

    try:  # the child may not have made the file, its tables, or the run yet
        keys = [k for k in stream_keys("oslo", path=folder / "journal.db") if k.startswith("0002:")]
    except LetItLoopError:
        return []
    db = folder / "journal.db"
    return read("oslo", keys[0], path=db) if keys else []


@pytest.fixture(scope="module")
def framework() -> Iterator[Preloaded]:
    with for_sdk("pydantic_ai", "pydantic_ai.models.openai") as preloaded:
        yield preloaded


@dataclass
class Resumed:
    recovery: str
    output: str
    log: list[str]
    chunks: list[Any]  # the answer's stream, read after both attempts


@pytest.fixture(scope="module", params=["continue", "auto"])
def resumed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, framework: Preloaded
) -> Resumed:
    """The run killed while the answer streams, five words journaled; then run again."""
    folder = tmp_path_factory.mktemp("killed")
    child = run_agent(framework, folder, request.param)
    wait_until(
        lambda: sum(c.kind == "text" for c in answer_chunks(folder)) >= 6,
        "the answer's first words journaled",
    )
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait().returncode == -signal.SIGKILL
    (folder / "go").touch()
    done = run_agent(framework, folder, request.param).wait()
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout.splitlines()[-1])["output"]
    return Resumed(request.param, output, lines(folder / "calls.log"), answer_chunks(folder))


class TestRunStreamKilledMidAnswer:
    def test_finished_calls_ran_once_and_the_output_is_whole(self, resumed: Resumed) -> None:
        calls = Counter(x for x in resumed.log if not x.startswith("word"))
        assert calls["start model 0"] == calls["end model 0"] == 1
        assert calls["start tool weather"] == calls["end tool weather"] == 1
        assert calls["end model 1"] == 1
        assert resumed.output == ANSWER

    def test_the_answer_continues_from_the_journaled_prefix_or_restarts(
        self, resumed: Resumed
    ) -> None:
        words = Counter(x for x in resumed.log if x.startswith("word"))
        kinds = [c.kind for c in resumed.chunks]
        if resumed.recovery == "continue":
            # The rerun generated only the words after the prefix: each word once.
            assert "start model 1 from 5" in resumed.log
            assert words == Counter(f"word {i}" for i in range(10))
            assert "reset" not in kinds
            assert any(
                c.kind == "state" and c.value == {"recovery": "continue"} for c in resumed.chunks
            )
        else:  # a FunctionModel is not OpenAI-compatible: "auto" restarts it
            assert resumed.log.count("start model 1 from 0") == 2
            assert words == Counter(f"word {i}" for i in range(10)) + Counter(
                f"word {i}" for i in range(5)
            )
            assert kinds.count("reset") == 1
        # Readers: the text since the last reset is the answer; the stream ended once.
        after = kinds[len(kinds) - kinds[::-1].index("reset") :] if "reset" in kinds else kinds
        text = "".join(c.text for c in resumed.chunks[len(kinds) - len(after) :])
        assert text == ANSWER
        assert kinds.count("end") == 1


class TestAnOpenAIChatModelKilledMidAnswer:
    def test_auto_continues_it_and_the_rerun_pays_only_the_rest(
        self, framework: Preloaded, tmp_path: Path
    ) -> None:
        pytest.importorskip("uvicorn")
        server = FakeOpenAI().start()
        try:
            script = write_script(tmp_path, "agent.py", OPENAI_AGENT)
            args = (str(tmp_path / "journal.db"), server.url)
            first = framework.run(script, *args, env={**os.environ, "KILL_AT": "15"})
            assert first.returncode == -signal.SIGKILL, first.stderr
            second = framework.run(script, *args)
            assert second.returncode == 0, second.stderr
        finally:
            server.stop()
        assert json.loads(second.stdout.splitlines()[-1])["output"] == "".join(
            answer("Tell me a story")
        )
        assert len(server.bills) == 2  # the killed call and its continuation
        prefix = server.requests[-1]["messages"][-1]
        assert prefix["role"] == "assistant"  # the journaled text, to be completed
        journaled = len(prefix["content"].split())
        assert 0 < journaled < LENGTH  # mid-answer (the unit reads a few chunks ahead)
        assert server.bills[1]["output"] == LENGTH - journaled


def test_an_unknown_stream_recovery_is_refused_with_the_choices() -> None:
    from letitloop.adapters.pydantic_ai import LetItLoopDurability
    from letitloop.errors import MisuseError

    with pytest.raises(MisuseError, match=r"'auto', 'continue', 'restart'"):
        LetItLoopDurability(stream_recovery="again")
