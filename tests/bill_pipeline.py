"""Paid pipelines under a budget, killed at random, for tests/test_bills.py and
benchmarks/bills.py.

``python tests/bill_pipeline.py MODE DURABILITY FOLDER TRIALS SEED [KILLS] [DB]``:
runs TRIALS trials of MODE, each a new journal file and a new bill in FOLDER
(with DB, a ``postgresql://`` or other location, each trial a goal of its
own there: ``paid-0``, ``paid-1``, …). A
trial runs attempts until one ends (the run finished, or its budget refused
a call), at most MAX_ATTEMPTS: each attempt is a child process forked from
this one (which imported the framework once, and never opens a journal),
SIGKILLed by itself at a point chosen at random among those it passes
(before the provider bills a call, after it billed it and before the reply
is back, after a step), or not at all; with KILLS ``billed``, every
attempt but the last is killed just after the provider billed its first
call. Prints one JSON line per trial:
``{"trial", "db", "goal", "bill", "calls", "budget", "outcome", "attempts",
"kills", "job"}`` (``calls``: the bill per call tag, ``""`` untagged; LangGraph's
model calls are tagged ``model:N``). Several jobs, each ``MODE DURABILITY FOLDER
TRIALS SEED [KILLS] [DB]``, separated by ``+``, run one after another in one
process (their modes' frameworks imported once; ``job``: the job's number, from 0):
each job's folder its own.

The fake provider is outside the journal: each call it bills appends its
tokens (input plus output) to the trial's bill file with one ``write``
(kept by the kernel whatever kills the process), before it replies. Its
input is a quarter of the prompt's text, its output at most the call's
``max_tokens``: within what the default estimate reserves.

MODE: ``sync`` and ``async`` (a ``Journal`` with ``letitloop.reserve`` in
each step), ``unreserved`` (the same steps without ``reserve``: the bill
before reservations), ``smolagents``, ``pydantic_ai``, ``autogen``, ``dspy``,
``openai_agents``, ``llamaindex`` (a ``FunctionAgent`` with
``LetItLoopRuntime``), ``langgraph`` (``create_react_agent``), ``langgraph_graph``
(a ``StateGraph`` with ``ToolNode`` and ``tools_condition``; both one request
bounded by ``durable_model(model, budget=...)``) and ``crewai`` (the real
framework, its agent wrapped
with the adapter's default arguments, an offline fake model with
``max_tokens``; CrewAI's, in CrewAI's own environment, is the crew's
kickoff with the handler's ``budget=``, the others' the agent run inside
``Journal(goal, budget=...)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import importlib
import json
import os
import random
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from letitloop import Budget, BudgetExceededError, Journal, reserve, usage

#: Attempts of one trial at most; the last is never killed.
MAX_ATTEMPTS = 10
#: Each call's output limit.
MAX_TOKENS = 60
#: The plain pipelines' budget and calls.
PLAIN_BUDGET, PLAIN_CALLS = 800, 6

WHERE: dict[str, Any] = {"kill_at": 0, "passed": 0, "bill": -1, "goal": "", "call": ""}


def point() -> None:
    """One place a kill may land: SIGKILL this process at the chosen one."""
    WHERE["passed"] += 1
    if WHERE["passed"] == WHERE["kill_at"]:
        os.kill(os.getpid(), signal.SIGKILL)


def provider(prompt: str, max_tokens: int) -> tuple[int, int]:
    """The paid call: billed (written to the bill) before it replies."""
    point()  # before the request reaches the provider
    tokens_in = len(prompt.encode()) // 4 + 1
    tokens_out = min(max_tokens, 20 + len(prompt) % 40)
    os.write(WHERE["bill"], f"{tokens_in + tokens_out} {WHERE['call']}\n".encode())
    point()  # billed; the reply is not back yet
    return tokens_in, tokens_out


# -- plain journals ------------------------------------------------------------------


def ask(prompt: str, reserving: bool) -> str:
    if reserving:
        reserve(prompt, max_tokens=MAX_TOKENS)
    tokens_in, tokens_out = provider(prompt, MAX_TOKENS)
    usage(input_tokens=tokens_in, output_tokens=tokens_out, model="fake")
    return f"answer to {prompt[:12]}"


async def ask_async(prompt: str) -> str:
    reserve(prompt, max_tokens=MAX_TOKENS)
    await asyncio.sleep(0)
    tokens_in, tokens_out = provider(prompt, MAX_TOKENS)
    usage(input_tokens=tokens_in, output_tokens=tokens_out, model="fake")
    return f"answer to {prompt[:12]}"


def question(i: int) -> str:
    return f"question {i}: " + "why " * (30 + 7 * i)


def plain(db: str, durability: Any, reserving: bool) -> str:
    budget = Budget(tokens=PLAIN_BUDGET)
    with Journal(WHERE["goal"], path=db, durability=durability, budget=budget) as j:
        answers = []
        for i in range(PLAIN_CALLS):
            answers.append(j.step(f"ask:{i}", ask, question(i), reserving))
            point()  # after a step
        return " / ".join(answers)


async def plain_async(db: str, durability: Any) -> str:
    budget = Budget(tokens=PLAIN_BUDGET)
    async with Journal(WHERE["goal"], path=db, durability=durability, budget=budget) as j:
        answers = []
        for i in range(PLAIN_CALLS):
            answers.append(await j.async_step(f"ask:{i}", ask_async, question(i)))
            point()
        return " / ".join(answers)


# -- smolagents ------------------------------------------------------------------------

SMOL_BUDGET, LOOKUPS = 10_000, 4


@functools.cache
def smolagents_parts() -> tuple[Any, Any]:
    """The fake model's class and the tool, built once before the forks (as :data:`PARTS`)."""
    from smolagents import tool
    from smolagents.models import (
        ChatMessage,
        ChatMessageToolCall,
        ChatMessageToolCallFunction,
        MessageRole,
        Model,
    )
    from smolagents.monitoring import TokenUsage

    @tool
    def lookup(n: int) -> str:
        """Look a number up.

        Args:
            n: the number
        """
        point()
        return f"fact {n}"

    class PaidModel(Model):
        def generate(self, messages: list[Any], **kwargs: Any) -> ChatMessage:
            text = " ".join(str(getattr(m, "content", "")) for m in messages)
            turn = sum(getattr(m, "role", None) == MessageRole.TOOL_RESPONSE for m in messages)
            tokens_in, tokens_out = provider(text, self.kwargs["max_tokens"])
            name, arguments = ("lookup", {"n": turn}) if turn < LOOKUPS else ("final_answer", {})
            if name == "final_answer":
                arguments = {"answer": f"done after {turn} lookups"}
            fn = ChatMessageToolCallFunction(name=name, arguments=arguments)
            return ChatMessage(
                role=MessageRole.ASSISTANT,
                content=None,
                tool_calls=[ChatMessageToolCall(function=fn, id=f"call_{turn}", type="function")],
                token_usage=TokenUsage(input_tokens=tokens_in, output_tokens=tokens_out),
            )

    return PaidModel, lookup


def smolagents_run(db: str, durability: Any) -> str:
    from smolagents import ToolCallingAgent
    from smolagents.monitoring import LogLevel

    from letitloop.adapters.smolagents import durable_agent

    PaidModel, lookup = smolagents_parts()
    model = PaidModel(model_id="paid", max_tokens=MAX_TOKENS)
    agent = ToolCallingAgent(
        tools=[lookup], model=model, verbosity_level=LogLevel.OFF, max_steps=LOOKUPS + 2
    )
    budget = Budget(tokens=SMOL_BUDGET)
    with Journal(WHERE["goal"], path=db, durability=durability, budget=budget):
        return str(durable_agent(agent).run("Look up four facts"))


# -- Pydantic AI -------------------------------------------------------------------------

PYDANTIC_BUDGET = 8_000


async def pydantic_ai_run(db: str, durability: Any) -> str:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    from letitloop.adapters.pydantic_ai import LetItLoopDurability

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts = [p for m in messages for p in m.parts]
        text = " ".join(str(getattr(p, "content", "")) for p in parts)
        limit = (info.model_settings or {}).get("max_tokens", 0)
        tokens_in, tokens_out = provider(text, limit)
        done = sum(isinstance(p, ToolReturnPart) for p in parts)
        spent = RequestUsage(input_tokens=tokens_in, output_tokens=tokens_out)
        if done < LOOKUPS:
            return ModelResponse(parts=[ToolCallPart("lookup", {"n": done})], usage=spent)
        return ModelResponse(parts=[TextPart(f"done after {done} lookups")], usage=spent)

    agent = Agent(
        FunctionModel(model),
        name="facts",
        capabilities=[LetItLoopDurability()],
        model_settings={"max_tokens": MAX_TOKENS},
    )

    @agent.tool_plain
    def lookup(n: int) -> str:
        point()
        return f"fact {n}"

    budget = Budget(tokens=PYDANTIC_BUDGET)
    async with Journal(WHERE["goal"], path=db, durability=durability, budget=budget):
        return (await agent.run("Look up four facts " + "please " * 40)).output


# -- AutoGen ---------------------------------------------------------------------------

AUTOGEN_BUDGET = 4_000


@functools.cache
def autogen_client() -> Any:
    """The fake client's class, built once before the forks (as :data:`PARTS`)."""
    from autogen_core import FunctionCall
    from autogen_core.models import CreateResult, FunctionExecutionResultMessage, RequestUsage
    from autogen_ext.models.replay import ReplayChatCompletionClient

    class PaidClient(ReplayChatCompletionClient):
        """Looks a number up per turn, then answers; billed by ``provider`` before it replies.
        ``max_tokens`` in its create arguments, as OpenAI's clients keep them."""

        def __init__(self) -> None:
            info = {"vision": False, "function_calling": True, "json_output": False}
            super().__init__([""], model_info={**info, "family": "fake", "structured_output": False})  # type: ignore[arg-type]  # fmt: skip  # noqa: E501
            self._create_args = {"model": "paid", "max_tokens": MAX_TOKENS}

        async def create(self, messages: Any, **kwargs: Any) -> CreateResult:
            text = " ".join(str(getattr(m, "content", "")) for m in messages)
            turn = sum(isinstance(m, FunctionExecutionResultMessage) for m in messages)
            tokens_in, tokens_out = provider(text, MAX_TOKENS)
            spent = RequestUsage(prompt_tokens=tokens_in, completion_tokens=tokens_out)
            content: Any = f"done after {turn} lookups"
            if turn < LOOKUPS:
                content = [FunctionCall(id=f"call_{turn}", name="lookup", arguments=f'{{"n": {turn}}}')]  # fmt: skip  # noqa: E501
            return CreateResult(finish_reason="stop", content=content, usage=spent, cached=False)

    return PaidClient


async def autogen_run(db: str, durability: Any) -> str:
    from autogen_agentchat.agents import AssistantAgent

    from letitloop.adapters.autogen import AutoGenStateSerializer

    PaidClient = autogen_client()

    async def lookup(n: int) -> str:
        """Look a number up."""
        point()
        return f"fact {n}"

    agent = AssistantAgent(
        "facts", model_client=PaidClient(), tools=[lookup], max_tool_iterations=LOOKUPS + 1
    )
    AutoGenStateSerializer().wrap_agent(agent)
    budget = Budget(tokens=AUTOGEN_BUDGET)
    async with Journal(WHERE["goal"], path=db, durability=durability, budget=budget):
        result = await agent.run(task="Look up four facts " + "please " * 40)
    return str(result.messages[-1].to_text())


# -- DSPy ------------------------------------------------------------------------------

DSPY_BUDGET = 11_000


@functools.cache
def dspy_lm() -> Any:
    """The fake LM's class, built once before the forks (as :data:`PARTS`)."""
    from dspy.utils.dummies import DummyLM

    class PaidLM(DummyLM):
        """A ReAct agent's LM: a lookup per turn, then finish, then the answer; billed by
        ``provider`` before it replies. ``max_tokens`` in its settings, as dspy.LM's."""

        def __init__(self) -> None:
            super().__init__({})
            self.kwargs["max_tokens"] = MAX_TOKENS

        def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
            last = messages[-1]["content"]
            seen = last.count("[[ ## observation_")
            reply: dict[str, Any]
            tokens_in, tokens_out = provider(json.dumps(messages), self.kwargs["max_tokens"])
            if "`[[ ## reasoning ## ]]`" in last:
                reply = {"reasoning": "read it", "answer": f"done after {seen} lookups"}
            elif seen < LOOKUPS:
                reply = {"next_thought": "more", "next_tool_name": "lookup", "next_tool_args": {"n": seen}}  # fmt: skip  # noqa: E501
            else:
                reply = {"next_thought": "enough", "next_tool_name": "finish", "next_tool_args": {}}  # fmt: skip  # noqa: E501
            self.history.append({"usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out}})  # fmt: skip  # noqa: E501
            return [self._format_answer_fields(reply)]

    return PaidLM


def dspy_run(db: str, durability: Any) -> str:
    import dspy

    from letitloop.adapters.dspy import JournaledLM, durable_program, journaled_tool

    PaidLM = dspy_lm()

    def lookup(n: int) -> str:
        """Look a number up."""
        point()
        return f"fact {n}"

    dspy.configure(lm=JournaledLM(PaidLM()))
    agent = durable_program(dspy.ReAct("question -> answer", tools=[journaled_tool(lookup)]))
    budget = Budget(tokens=DSPY_BUDGET)
    with Journal(WHERE["goal"], path=db, durability=durability, budget=budget):
        return str(agent(question="Look up four facts").answer)


# -- OpenAI Agents ----------------------------------------------------------------------

OPENAI_AGENTS_BUDGET = 4_000


@functools.cache
def openai_agents_parts() -> tuple[Any, Any]:
    """The fake model's class and the tool, built once before the forks (as :data:`PARTS`)."""
    from agents import function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    class PaidModel(Model):
        """A lookup per turn, then the answer; billed by ``provider`` before it replies,
        up to the ``max_tokens`` of the model settings the run passes it."""

        async def get_response(
            self, system_instructions: Any, input: Any, model_settings: Any, *a: Any, **kw: Any
        ) -> ModelResponse:
            items = [input] if isinstance(input, str) else list(input)
            kinds = [
                i.get("type") if isinstance(i, dict) else getattr(i, "type", None) for i in items
            ]
            turn = kinds.count("function_call_output")
            tokens_in, tokens_out = provider(
                json.dumps(items, default=str), model_settings.max_tokens or 0
            )
            said = f"done after {turn} lookups"
            output: Any = ResponseFunctionToolCall(
                call_id=f"call_{turn}",
                name="lookup",
                arguments=f'{{"n": {turn}}}',
                type="function_call",
            )
            if turn >= LOOKUPS:
                text = ResponseOutputText(text=said, type="output_text", annotations=[])
                output = ResponseOutputMessage(
                    id="msg", role="assistant", status="completed", type="message", content=[text]
                )
            spent = Usage(requests=1, input_tokens=tokens_in, output_tokens=tokens_out)
            return ModelResponse(output=[output], usage=spent, response_id=None)

        def stream_response(self, *a: Any, **kw: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def lookup(n: int) -> str:
        """Look a number up."""
        point()
        return f"fact {n}"

    return PaidModel, lookup


async def openai_agents_run(db: str, durability: Any) -> str:
    from agents import Agent, ModelSettings, Runner, set_tracing_disabled

    from letitloop.adapters.openai_agents import durable_agent

    set_tracing_disabled(True)
    PaidModel, lookup = openai_agents_parts()
    agent = Agent(
        name="facts",
        instructions="Look facts up.",
        model=PaidModel(),
        tools=[lookup],
        model_settings=ModelSettings(max_tokens=MAX_TOKENS),
    )
    durable_agent(agent)
    budget = Budget(tokens=OPENAI_AGENTS_BUDGET)
    async with Journal(WHERE["goal"], path=db, durability=durability, budget=budget):
        result = await Runner.run(agent, "Look up four facts " + "please " * 40)
    return str(result.final_output)


# -- LlamaIndex ------------------------------------------------------------------------

LLAMAINDEX_BUDGET = 4_500


@functools.cache
def llamaindex_llm() -> Any:
    """The fake LLM's class, built once before the forks (as :data:`PARTS`)."""
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.core.tools import ToolSelection

    class PaidLLM(MockFunctionCallingLLM):
        """A lookup per turn, then the answer; billed by ``provider`` before it replies,
        the usage in the response's ``additional_kwargs`` as LlamaIndex's OpenAI LLM gives it."""

        max_tokens: int = MAX_TOKENS

        async def astream_chat(self, messages: Any, **kwargs: Any) -> Any:
            text = " ".join(str(m.content or "") for m in messages)
            turn = sum(m.role == "tool" for m in messages)
            tokens_in, tokens_out = provider(text, self.max_tokens)
            reply = ChatMessage(role="assistant", content=f"done after {turn} lookups")
            if turn < LOOKUPS:
                call = ToolSelection(tool_id=f"call_{turn}", tool_name="lookup", tool_kwargs={"n": turn})  # fmt: skip  # noqa: E501
                reply = ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [call]})  # fmt: skip  # noqa: E501
            spent = {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out}  # fmt: skip  # noqa: E501

            async def chunks() -> Any:
                yield ChatResponse(message=reply, delta=reply.content, additional_kwargs=spent)

            return chunks()

    return PaidLLM


async def llamaindex_run(db: str, durability: Any) -> str:
    from llama_index.core.agent.workflow import FunctionAgent

    from letitloop.adapters.llamaindex import LetItLoopRuntime

    PaidLLM = llamaindex_llm()

    def lookup(n: int) -> str:
        """Look a number up."""
        point()
        return f"fact {n}"

    agent = FunctionAgent(
        name="facts",
        system_prompt="You look facts up.",
        tools=[lookup],
        llm=PaidLLM(),
        runtime=LetItLoopRuntime(),
    )
    budget = Budget(tokens=LLAMAINDEX_BUDGET)
    async with Journal(WHERE["goal"], path=db, durability=durability, budget=budget):
        return str(await agent.run(user_msg="Look up four facts " + "please " * 40))


# -- LangGraph -------------------------------------------------------------------------

#: The request's budget: ``durable_model(model, budget=...)`` bounds the whole ``invoke``.
LANGGRAPH_BUDGET = 1_500


@functools.cache
def langgraph_parts() -> tuple[Any, Any]:
    """The fake chat model's class and the tool, built once before the forks (as
    :data:`PARTS`)."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.messages.ai import UsageMetadata
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    class PaidChat(BaseChatModel):
        """A lookup per turn, then the answer; billed by ``provider`` (its bill tagged with
        the call) before it replies, up to its ``max_tokens``."""

        max_tokens: int = MAX_TOKENS

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:  # fmt: skip  # noqa: E501
            turn = sum(isinstance(m, ToolMessage) for m in messages)
            WHERE["call"] = f"model:{turn}"
            # Billed as a provider bills a chat: the messages' text and their tool calls.
            text = " ".join(f"{m.content} {json.dumps(getattr(m, 'tool_calls', None) or '')}" for m in messages)  # fmt: skip  # noqa: E501
            tokens_in, tokens_out = provider(text, self.max_tokens)
            reply = AIMessage(f"done after {turn} lookups")
            if turn < LOOKUPS:
                reply = AIMessage("", tool_calls=[{"name": "lookup", "args": {"n": turn}, "id": f"call_{turn}"}])  # fmt: skip  # noqa: E501
            total = tokens_in + tokens_out
            reply.usage_metadata = UsageMetadata(input_tokens=tokens_in, output_tokens=tokens_out, total_tokens=total)  # type: ignore[typeddict-item]  # fmt: skip  # noqa: E501
            return ChatResult(generations=[ChatGeneration(message=reply)])

        @property
        def _llm_type(self) -> str:
            return "paid"

        def bind_tools(self, tools: Any, **kw: Any) -> Any:
            return self.bind(tools=[t.name for t in tools])

    @tool
    def lookup(n: int) -> str:
        """Look a number up."""
        point()
        return f"fact {n}"

    return PaidChat, lookup


def langgraph_run(db: str, durability: Any, graph: str = "react") -> str:
    """One request of a LangGraph agent, as LangGraph's docs write it: ``create_react_agent``
    ("react"), or a ``StateGraph`` with a model node, ``ToolNode`` and ``tools_condition``
    ("graph"); the model ``durable_model(model, budget=...)``, the tools
    ``durable_node(ToolNode(...))``."""
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition

    from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, durable_model, durable_node

    PaidChat, lookup = langgraph_parts()
    model = durable_model(PaidChat(), budget=Budget(tokens=LANGGRAPH_BUDGET))
    saver = LetItLoopCheckpointSaver(db, durability=durability)
    config: Any = {"configurable": {"thread_id": WHERE["goal"]}}
    asked: Any = {"messages": [("user", "Look up four facts " + "please " * 40)]}
    if graph == "react":
        agent = create_react_agent(model, durable_node(ToolNode([lookup])), checkpointer=saver)
        return str(agent.invoke(asked, config)["messages"][-1].content)
    llm = model.bind_tools([lookup])

    def chatbot(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chatbot", chatbot)
    builder.add_node("tools", durable_node(ToolNode([lookup])))
    builder.add_conditional_edges("chatbot", tools_condition)
    builder.add_edge("tools", "chatbot")
    builder.add_edge(START, "chatbot")
    built = builder.compile(checkpointer=saver)
    return str(built.invoke(asked, config)["messages"][-1].content)


# -- CrewAI (in CrewAI's own environment) ----------------------------------------------

CREWAI_BUDGET = 4_000


def crewai_run(db: str, durability: Any) -> str:
    # Imported by name: mypy checks it in CrewAI's environment (.ci/run), not this one.
    paid_crew = importlib.import_module("crewai_bills").paid_crew
    budget = Budget(tokens=CREWAI_BUDGET)
    crew = paid_crew(WHERE["goal"], db, durability, budget, provider, point, LOOKUPS)
    return str(crew.kickoff(inputs={"count": "four"}).raw)


# -- the trials ------------------------------------------------------------------------

BUDGETS = {
    "sync": PLAIN_BUDGET,
    "async": PLAIN_BUDGET,
    "unreserved": PLAIN_BUDGET,
    "smolagents": SMOL_BUDGET,
    "pydantic_ai": PYDANTIC_BUDGET,
    "autogen": AUTOGEN_BUDGET,
    "dspy": DSPY_BUDGET,
    "crewai": CREWAI_BUDGET,
    "openai_agents": OPENAI_AGENTS_BUDGET,
    "llamaindex": LLAMAINDEX_BUDGET,
    "langgraph": LANGGRAPH_BUDGET,
    "langgraph_graph": LANGGRAPH_BUDGET,
}
#: Kill points an attempt may pass, about: the random kill is chosen among them.
POINTS = {"sync": 18, "async": 18, "unreserved": 18, "smolagents": 14, "pydantic_ai": 14}
POINTS.update(autogen=14, dspy=16, crewai=14, openai_agents=14, llamaindex=14, langgraph=14)
POINTS.update(langgraph_graph=14)
#: The framework each mode imports once, before the forks (its children share the import).
FRAMEWORKS = {
    "smolagents": "smolagents",
    "pydantic_ai": "pydantic_ai",
    "autogen": "autogen_agentchat.agents",
    "dspy": "dspy",
    "crewai": "crewai",
    "openai_agents": "agents",
    "llamaindex": "llama_index.core.agent.workflow",
    "langgraph": "langgraph.prebuilt",
    "langgraph_graph": "langgraph.prebuilt",
}
#: What each attempt of a mode would build again, built once before the forks (about 5-10
#: ms of CPU an attempt: a pydantic model class, a tool's schema): its fake model's class,
#: its tool. The agent itself is made by each attempt, as a program makes it.
PARTS: dict[str, Any] = {
    "smolagents": smolagents_parts,
    "autogen": autogen_client,
    "dspy": dspy_lm,
    "openai_agents": openai_agents_parts,
    "llamaindex": llamaindex_llm,
    "langgraph": langgraph_parts,
    "langgraph_graph": langgraph_parts,
}
#: CrewAI's telemetry and tracing opt-outs (as tests/crewai_crew.py sets them).
CREWAI_OPT_OUTS = {
    "OTEL_SDK_DISABLED": "true",
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
}


def attempt(mode: str, durability: Any, db: str) -> str:
    """One attempt, in this (forked) process."""
    if mode in ("sync", "unreserved"):
        return plain(db, durability, mode == "sync")
    if mode == "async":
        return asyncio.run(plain_async(db, durability))
    if mode == "smolagents":
        return smolagents_run(db, durability)
    if mode == "autogen":
        return asyncio.run(autogen_run(db, durability))
    if mode == "dspy":
        return dspy_run(db, durability)
    if mode == "crewai":
        return crewai_run(db, durability)
    if mode == "openai_agents":
        return asyncio.run(openai_agents_run(db, durability))
    if mode == "llamaindex":
        return asyncio.run(llamaindex_run(db, durability))
    if mode in ("langgraph", "langgraph_graph"):
        return langgraph_run(db, durability, "react" if mode == "langgraph" else "graph")
    return asyncio.run(pydantic_ai_run(db, durability))


def refused(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the budget's refusal, or a framework's error caused by it."""
    while exc is not None:
        if isinstance(exc, BudgetExceededError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def forked(mode: str, durability: Any, db: str, bill: str, kill_at: int) -> int:
    """Run one attempt in a forked child; its exit status (-9: killed)."""
    pid = os.fork()
    if pid == 0:  # the child: a process of its own, which opens its own journal
        code = 1
        try:
            WHERE.update(kill_at=kill_at, passed=0)
            WHERE["bill"] = os.open(bill, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            attempt(mode, durability, db)
            code = 0
        except BaseException as exc:
            code = 3 if refused(exc) else 1
            if code == 1:
                import traceback

                traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def trial(
    mode: str,
    durability: Any,
    folder: Path,
    n: int,
    rng: random.Random,
    kills_at: str,
    location: str | None,
) -> dict[str, Any]:
    db, bill = folder / f"{mode}-{durability}-{n}.db", folder / f"{mode}-{durability}-{n}.bill"
    WHERE["goal"] = f"paid-{n}"
    kills, outcome, attempts = 0, "unfinished", 0
    for attempts in range(1, MAX_ATTEMPTS + 1):
        last = attempts == MAX_ATTEMPTS
        kill_at = 0 if last or rng.random() < 0.15 else rng.randint(1, POINTS[mode])
        if kills_at == "billed":
            kill_at = 0 if last else 2
        status = forked(mode, durability, location or str(db), str(bill), kill_at)
        if status == -signal.SIGKILL:
            kills += 1
            continue
        outcome = {0: "done", 3: "refused"}.get(status, f"exit {status}")
        break
    calls: dict[str, int] = {}
    for line in bill.read_text().splitlines() if bill.exists() else ():
        tokens, _, call = line.partition(" ")
        calls[call] = calls.get(call, 0) + int(tokens)
    return {
        "trial": n,
        "db": location or str(db),
        "goal": WHERE["goal"],
        "bill": sum(calls.values()),
        "calls": calls,
        "budget": BUDGETS[mode],
        "outcome": outcome,
        "attempts": attempts,
        "kills": kills,
    }


def preload(mode: str) -> None:
    """Import the framework, its adapter and letitloop's journal modules once, before the
    forks, and load what a run loads at its first call (tests/preloaded.py's lists): each
    attempt would load them again (Pydantic AI's: about 0.2 s of CPU an attempt)."""
    import importlib

    from preloaded import JOURNAL_MODULES, SDKS

    modules, warm = SDKS.get({"openai_agents": "agents"}.get(mode, mode), ((), ""))
    if mode == "smolagents":
        modules = ("smolagents", "letitloop.adapters.smolagents")
    if mode in ("langgraph", "langgraph_graph"):
        modules = ("letitloop.adapters.langgraph", "langgraph.prebuilt")
    if mode == "llamaindex":  # as tests/test_llamaindex_agents.py's forker
        modules = ("letitloop.adapters.llamaindex", "workflows.representation", "workflows.runtime.verbose")  # fmt: skip  # noqa: E501
        warm = "from llama_index.core.utils import get_tokenizer; get_tokenizer()"
    if mode == "openai_agents":
        # What an attempt's first call builds, about 60 ms of CPU: the trace provider
        # (set_tracing_disabled makes it: its exporter's HTTP client loads the system's
        # certificates; it starts no thread), and the fake model's response type's
        # validator (pydantic builds it at its first instance).
        warm = (
            "from agents import set_tracing_disabled\n"
            "from openai.types.responses import ResponseFunctionToolCall\n"
            "set_tracing_disabled(True)\n"
            "ResponseFunctionToolCall(\n"
            "    call_id='c', name='n', arguments='{}', type='function_call'\n"
            ")\n"
        )
    for name in (*modules, *JOURNAL_MODULES):
        importlib.import_module(name)
    exec(warm, {})


def discover(mode: str) -> None:
    """Import here, before the forks, what an attempt of ``mode`` imports at its first run
    (an adapter's modules, letitloop's streams and inspection for LangGraph's: about 50 ms
    of CPU an attempt): found by one unkilled attempt in a scratch journal, in a child (this
    process opens no journal), which writes the names of the modules it imported."""
    found, names = os.pipe()
    with tempfile.TemporaryDirectory() as scratch:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(found)
                before = set(sys.modules)
                WHERE.update(kill_at=0, passed=0, goal="discovery")
                WHERE["bill"] = os.open(os.devnull, os.O_WRONLY)
                with contextlib.suppress(BudgetExceededError):
                    attempt(mode, "process", os.path.join(scratch, "discovery.db"))
                os.write(names, "\n".join(sorted(set(sys.modules) - before)).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(names)
        with os.fdopen(found, "rb") as reading:
            imported = reading.read().decode().split()
        _, status = os.waitpid(pid, 0)
    assert status == 0, f"the discovery attempt of {mode} failed: {status}"
    for name in imported:
        importlib.import_module(name)


def main() -> None:
    # Jobs separated by "+": one after another, their imports made once (one framework's).
    args, jobs = sys.argv[1:], []
    while "+" in args:
        jobs.append(args[: args.index("+")])
        args = args[args.index("+") + 1 :]
    jobs.append(args)
    modes = list(dict.fromkeys(job[0] for job in jobs))
    if "crewai" in modes:
        os.environ.update(CREWAI_OPT_OUTS)
    gc.disable()  # the imports' objects live as long as this process: no collection meanwhile
    for mode in modes:
        if mode in FRAMEWORKS:  # import the framework once, before the forks
            __import__(FRAMEWORKS[mode])
        preload(mode)
        if mode in FRAMEWORKS and mode != "crewai":  # (CrewAI's: tests/test_crewai.py's forker)
            discover(mode)
        # What every attempt of the mode would build again: its fake model's class, its tool.
        PARTS.get(mode, lambda: None)()
    # Out of the collector's sight before the first fork (as tests/preloaded.py's forker):
    # an attempt's collections skip them and do not copy every page that holds them.
    gc.collect()
    gc.freeze()
    gc.enable()
    for number, (mode, durability, folder, trials, seed, *rest) in enumerate(jobs):
        kills_at = rest[0] if rest else "random"
        location = rest[1] if len(rest) > 1 else None
        rng = random.Random(int(seed))
        for n in range(int(trials)):
            done = trial(mode, durability, Path(folder), n, rng, kills_at, location)
            print(json.dumps({**done, "job": number}), flush=True)


if __name__ == "__main__":
    main()
