"""LangGraph ``stream_mode="messages"``: a durable node's model streams, killed mid-answer.

The graph: ``plan`` (a durable node whose step writes ``plan`` to a side file),
then ``answer`` (a durable node calling ``durable_model(model).invoke``), with
the journal's checkpointer. The model is an offline chat model that streams
twenty words, writing to the side file where it starts (after a kill it may be
given the journaled prefix to go on from). The program (a real child, forked
from an interpreter that imported LangGraph) runs ``graph.stream(...,
stream_mode="messages")``; its model SIGKILLs the process as it is about to stream
the answer's eleventh word (in the model, not where the program receives the tokens:
LangGraph hands them over from the node's thread, which on a busy machine may run
ahead of the receiver and journal the whole answer before a receiver's kill); it
then runs again (also with ``graph.astream`` and an async node). The test reads the
node's journaled stream from its own process (another than the writer's).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import write_script
from preloaded import LANGGRAPH, Preloaded

pytest.importorskip("langgraph")

PROGRAM = """
    import os, signal, sys, time, json

    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
    from langgraph.graph import START, MessagesState, StateGraph

    from letitloop import step
    from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, durable_model, durable_node
    from letitloop.streams import calls

    import asyncio

    DB, SIDE, RECOVERY, FLAVOR = sys.argv[1:]
    KILL_AT = int(os.environ.get("KILL_AT", "0"))
    calls.FLUSH_EVERY = 4  # a batch every 4 chunks: a kill mid-answer leaves some journaled
    WORDS = [f"w{i}" for i in range(20)]


    def note(line):
        with open(SIDE, "a") as f:
            f.write(line + "\\n")


    class Words(BaseChatModel):
        @property
        def _llm_type(self):
            return "words"

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            raise AssertionError("the graph streams")

        def _stream(self, messages, stop=None, run_manager=None, **kwargs):
            last = messages[-1]  # the journaled prefix to go on from, after a kill
            done = last.content.split() if isinstance(last, AIMessage) else []
            start = sum(w in WORDS for w in done)
            note(f"model from {start}")
            for i, word in enumerate(WORDS[start:], start):
                if KILL_AT and i == KILL_AT:  # mid-answer: words 1-10 streamed
                    os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(0.002)
                yield ChatGenerationChunk(message=AIMessageChunk(content=word + " "))
            spent = {"input_tokens": 3, "output_tokens": 20 - start, "total_tokens": 23 - start}
            yield ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata=spent))


    model = durable_model(Words(), stream_recovery=RECOVERY)


    def planned():
        note("plan")
        return AIMessage(content="plan")


    @durable_node
    def plan(state):
        return {"messages": [step("plan", planned)]}


    if FLAVOR == "sync":

        @durable_node
        def answer(state):
            return {"messages": [model.invoke(state["messages"])]}

    else:

        @durable_node
        async def answer(state):
            return {"messages": [await model.ainvoke(state["messages"])]}


    graph = StateGraph(MessagesState)
    graph.add_node("plan", plan)
    graph.add_node("answer", answer)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "answer")
    app = graph.compile(checkpointer=LetItLoopCheckpointSaver(DB))
    config = {"configurable": {"thread_id": "t"}}
    tokens = []
    asked = {"messages": [HumanMessage("hi")]}


    def received(message, meta):
        if meta.get("langgraph_node") == "answer" and message.content:
            tokens.append(message.content)


    async def astreamed():
        async for message, meta in app.astream(asked, config, stream_mode="messages"):
            received(message, meta)


    if FLAVOR == "sync":
        for message, meta in app.stream(asked, config, stream_mode="messages"):
            received(message, meta)
    else:
        asyncio.run(astreamed())
    last = app.get_state(config).values["messages"][-1]
    print(json.dumps({"streamed": tokens, "answer": last.content}))
"""

WHOLE = "".join(f"w{i} " for i in range(20))
KILL_AT = 10


@pytest.fixture(scope="module")
def forker() -> Iterator[Preloaded]:
    with Preloaded(*LANGGRAPH, with_letitloop=True) as p:
        yield p


@pytest.fixture(
    scope="module",
    params=[("continue", "sync"), ("auto", "sync"), ("continue", "async")],
    ids=lambda p: f"{p[0]}, {p[1]}",
)
def killed(
    request: pytest.FixtureRequest, forker: Preloaded, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The graph killed while ``answer`` streams, then run again."""
    folder = tmp_path_factory.mktemp("killed")
    script = write_script(folder, "program.py", PROGRAM)
    args = (str(folder / "journal.db"), str(folder / "side.log"), *request.param)
    first = forker.run(script, *args, env={"KILL_AT": str(KILL_AT)})
    assert first.returncode == -signal.SIGKILL, first.stderr
    second = forker.run(script, *args)
    assert second.returncode == 0, second.stderr
    from letitloop.streams import read

    return {
        "recovery": request.param[0],
        **json.loads(second.stdout.splitlines()[-1]),
        "side": (folder / "side.log").read_text().splitlines(),
        "chunks": read("langgraph:answer", path=folder / "journal.db"),
    }


class TestAStreamingNodeKilledMidAnswer:
    def test_the_finished_node_is_not_repaid_and_the_answer_is_whole(
        self, killed: dict[str, Any]
    ) -> None:
        assert killed["side"].count("plan") == 1
        assert killed["answer"] == WHOLE
        # The rerun's messages stream: the journaled tokens first, then the rest, each once.
        assert "".join(killed["streamed"]) == WHOLE

    def test_the_cut_call_continues_from_its_journaled_prefix_or_restarts(
        self, killed: dict[str, Any]
    ) -> None:
        chunks = killed["chunks"]
        journaled = sum(c.kind == "text" and c.attempt == 1 for c in chunks)
        starts = [line for line in killed["side"] if line.startswith("model from")]
        kinds = [c.kind for c in chunks]
        if killed["recovery"] == "continue":
            assert 0 < journaled <= KILL_AT
            # The rerun asked only for the words after the journaled prefix.
            assert starts == ["model from 0", f"model from {journaled}"]
            assert "reset" not in kinds
            assert {"recovery": "continue"} in [c.value for c in chunks if c.kind == "state"]
        else:  # an offline model is no OpenAI one: "auto" restarts it, readers are told
            assert starts == ["model from 0", "model from 0"]
            assert kinds.count("reset") == 1
        since = kinds[::-1].index("reset") if "reset" in kinds else len(kinds)
        assert "".join(c.text for c in chunks[len(kinds) - since :]) == WHOLE
        assert kinds.count("end") == 1


def test_an_unknown_stream_recovery_is_refused_with_the_choices() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from letitloop.adapters.langgraph import durable_model
    from letitloop.errors import MisuseError

    with pytest.raises(MisuseError, match=r"'auto', 'continue', 'restart'"):
        durable_model(FakeListChatModel(responses=["hi"]), stream_recovery="again")
