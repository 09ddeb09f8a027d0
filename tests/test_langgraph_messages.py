"""LangChain's messages as step results: registered on import, back equal, usage readable.

Real journal files; the round trip is read back by a fresh interpreter,
which knows the types only because importing the adapter registered them.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph.graph", reason="LangGraph is not installed (letitloop[langgraph])")

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    ToolMessageChunk,
)
from langgraph.graph import END, START, StateGraph

from letitloop import Journal, step
from letitloop.adapters.langgraph import (
    LetItLoopCheckpointSaver,
    durable_node,
    register_langchain_types,
)
from letitloop.codec import CodecRegistry

ROOT = Path(__file__).resolve().parent.parent


def _messages() -> dict[str, Any]:
    return {
        "ai": AIMessage(
            content=[{"type": "text", "text": "Paris."}, {"type": "reasoning", "reasoning": "…"}],
            id="run-7f3",
            name="assistant",
            tool_calls=[{"name": "lookup", "args": {"city": "Paris"}, "id": "call_1"}],
            invalid_tool_calls=[
                {"name": "broken", "args": "{not json", "id": "call_2", "error": "bad json"}
            ],
            usage_metadata={
                "input_tokens": 12,
                "output_tokens": 30,
                "total_tokens": 42,
                "input_token_details": {"cache_read": 4},
                "output_token_details": {"reasoning": 10},
            },
            response_metadata={"model_name": "gpt-test", "finish_reason": "tool_calls"},
            additional_kwargs={"refusal": None},
        ),
        "chunk": AIMessageChunk(
            content="Par",
            tool_call_chunks=[{"name": "lookup", "args": '{"city": "Pa', "id": "c1", "index": 0}],
            usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        ),
        "human": HumanMessage("What is the capital of France?", id="h1"),
        "system": SystemMessage("Be brief."),
        "tool": ToolMessage(
            content="sunny", tool_call_id="call_1", artifact={"raw": [1, 2]}, status="error"
        ),
        "tool_chunk": ToolMessageChunk(content="su", tool_call_id="call_1"),
        "function": FunctionMessage(content="42", name="answer"),
        "chat": ChatMessage(content="hi", role="critic"),
        "remove": RemoveMessage(id="h1"),
        "document": Document(page_content="Paris is…", metadata={"source": "atlas", "page": 3}),
    }


class TestAStepThatReturnsLangChainMessages:
    def test_each_comes_back_equal_and_of_its_type_in_a_fresh_interpreter(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        with Journal("chat", run="r1", path=db) as j:
            for key, value in _messages().items():
                j.step(key, lambda v=value: v)
        script = tmp_path / "replay.py"
        script.write_text(
            textwrap.dedent(
                """
                import sqlite3, sys
                sys.path.insert(0, sys.argv[2])
                import letitloop.adapters.langgraph  # registers LangChain's types
                from letitloop import codec
                from tests.test_langgraph_messages import _messages

                conn = sqlite3.connect(sys.argv[1])
                (table,) = conn.execute("SELECT journal_table FROM goals").fetchone()
                rows = dict(conn.execute(f'SELECT key, result FROM "{table}"'))
                for key, value in _messages().items():
                    back = codec.decode(rows[key])  # what a replay decodes, default registry
                    assert type(back) is type(value), (key, type(back))
                    assert back == value, key
                    assert back.model_dump() == value.model_dump(), key
                    assert repr(back) == repr(value), key
                chunk = codec.decode(rows["chunk"])
                more = chunk + type(chunk)(content="is")
                assert more.content == "Paris", more.content
                print("ok")
                """
            ),
            encoding="utf-8",
        )
        done = subprocess.run(
            [sys.executable, str(script), str(db), str(ROOT)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "ok"

    def test_a_replayed_step_hands_back_an_equal_message_without_calling_the_model(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        asked: list[str] = []

        def model(prompt: str) -> AIMessage:
            asked.append(prompt)
            return _messages()["ai"]

        with Journal("chat", run="r1", path=db) as j:
            first = j.step("ask", model, "capital?")
        with Journal("chat", run="r1", path=db) as j:
            again = j.step("ask", model, "capital?")
        assert asked == ["capital?"]
        assert type(again) is AIMessage and again == first
        assert again.tool_calls == first.tool_calls and again.usage_metadata["total_tokens"] == 42

    def test_the_row_is_readable_json_and_its_token_usage_can_be_queried(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "journal.db"
        with Journal("chat", run="r1", path=db) as j:
            j.step("ask", lambda: _messages()["ai"])
            table = j.table
        with sqlite3.connect(db) as conn:
            (text, total) = conn.execute(
                f"SELECT result, json_extract(result, "
                f"'$.\"!langchain_core.messages.ai.AIMessage\".usage_metadata.total_tokens') "
                f"FROM \"{table}\" WHERE key = 'ask'"
            ).fetchone()
        assert total == 42
        payload = json.loads(text)["!langchain_core.messages.ai.AIMessage"]
        assert payload["tool_calls"][0]["args"] == {"city": "Paris"}

    def test_the_docs_example_llm_invoke_as_a_step_replays_its_ai_message(
        self, tmp_path: Path
    ) -> None:
        class Notes(TypedDict, total=False):
            notes: str
            summary: Any

        llm = FakeListChatModel(responses=["first answer", "second answer"])
        fail = [True]

        @durable_node
        def summarize(state: Notes) -> dict[str, Any]:
            summary = step("summarize", llm.invoke, state["notes"])
            if fail[0]:
                fail[0] = False
                raise ConnectionError("died after the model answered")
            return {"summary": summary}

        g = StateGraph(Notes)
        g.add_node("summarize", summarize)
        g.add_edge(START, "summarize")
        g.add_edge("summarize", END)
        config = {"configurable": {"thread_id": "t"}}
        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            app = g.compile(checkpointer=saver)
            with pytest.raises(ConnectionError):
                app.invoke({"notes": "a b c"}, config)
            out = app.invoke(None, config)
        assert isinstance(out["summary"], AIMessage)
        assert out["summary"].content == "first answer"  # replayed: the model was not asked again


class TestRegistration:
    def test_a_registration_of_your_own_is_left_as_it_is(self) -> None:
        mine = CodecRegistry()
        mine.register(
            AIMessage, name="my.AI", encode=lambda m: m.content, decode=lambda c: AIMessage(c)
        )
        register_langchain_types(mine)
        assert mine._entry_for_type(AIMessage).name == "my.AI"  # type: ignore[union-attr]
        assert HumanMessage in mine

    def test_a_durable_node_given_its_own_registry_still_knows_langchains_types(
        self, tmp_path: Path
    ) -> None:
        class State(TypedDict, total=False):
            reply: Any

        @durable_node(registry=CodecRegistry())
        def ask(state: State) -> dict[str, Any]:
            return {"reply": step("ask", lambda: AIMessage("hi", id="x"))}

        g = StateGraph(State)
        g.add_node("ask", ask)
        g.add_edge(START, "ask")
        g.add_edge("ask", END)
        with LetItLoopCheckpointSaver(tmp_path / "journal.db") as saver:
            out = g.compile(checkpointer=saver).invoke({}, {"configurable": {"thread_id": "t"}})
        assert out["reply"] == AIMessage("hi", id="x")
