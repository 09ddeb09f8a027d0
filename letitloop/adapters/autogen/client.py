"""``DurableChatCompletionClient``: an AutoGen model client whose every ``create`` is a step.

The step's result is the ``CreateResult`` as JSON data (content or function
calls, finish reason, usage, thought) and comes back as a ``CreateResult``.
The call's identity is the prompt (every ``LLMMessage`` as JSON data), the
names of the tools offered, the tool choice, ``json_output`` and
``extra_create_args``. Usage is reported with ``letitloop.usage`` from the
result's ``RequestUsage``. ``create_stream`` is journaled as one ``create``:
it yields the whole result, no chunks. A replayed call is also made to
AutoGen's ``ReplayChatCompletionClient`` (a queue of replies, AutoGen's test
double), its reply dropped: the queue stays where an uninterrupted run left it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from functools import partial
from typing import Any, Literal

from autogen_core import CancellationToken, ComponentModel
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
    ModelCapabilities,
    ModelInfo,
    RequestUsage,
)
from autogen_core.tools import Tool, ToolSchema
from pydantic import BaseModel

from letitloop.adapters.agentcalls import Pricing, plain
from letitloop.adapters.autogen.calls import AgentCalls
from letitloop.adapters.reserving import max_tokens_of, reserve_call
from letitloop.identity.step_names import named
from letitloop.identity.unchecked import unchecked
from letitloop.run.durable import usage


def tool_name(tool: Tool | ToolSchema) -> str:
    return tool["name"] if isinstance(tool, Mapping) else tool.name


def model_name(client: ChatCompletionClient) -> str | None:
    """The model's name as the client was configured (OpenAI's clients say), else its family."""
    name = getattr(client, "_create_args", {}).get("model")
    if isinstance(name, str) and name:
        return name
    family = client.model_info.get("family")
    return family if isinstance(family, str) and family and family != "unknown" else None


#: A model call as the step gets it: the real client, the prompt, the other arguments,
#: the user's pricing, and a list the call marks when it runs (a replay does not).
ModelCall = tuple[
    ChatCompletionClient, Sequence[LLMMessage], dict[str, Any], Pricing | None, list[bool]
]


def queued_replies(client: ChatCompletionClient) -> bool:
    """Whether ``client`` is AutoGen's ``ReplayChatCompletionClient`` as AutoGen ships it:
    a queue of replies, each ``create`` the next (a subclass that overrides ``create``
    chooses its replies itself, and is not)."""
    try:
        from autogen_ext.models.replay import ReplayChatCompletionClient
    except ImportError:  # autogen-ext is not installed: no such client
        return False
    return (
        isinstance(client, ReplayChatCompletionClient)
        and type(client).create is ReplayChatCompletionClient.create
    )


@named("letitloop:autogen.model")
async def call_model(identity: Any, call: ModelCall) -> dict[str, Any]:
    """The step's function: one real ``create``, its usage (and cost) reported."""
    del identity  # the call's identity, for the journal's argument check only
    client, messages, kwargs, cost, ran = call
    ran.append(True)
    name = model_name(client)
    limit = partial(
        max_tokens_of, kwargs.get("extra_create_args"), getattr(client, "_create_args", None)
    )
    reserve_call(messages, limit, name, cost)  # settled by usage() below
    result = await client.create(messages, **kwargs)
    spent = result.usage
    price = None if cost is None else cost(name, spent.prompt_tokens, spent.completion_tokens)
    usage(result, model=name, cost=price)
    dumped: dict[str, Any] = result.model_dump(mode="json")
    return dumped


class DurableChatCompletionClient(ChatCompletionClient):
    """``client`` with each ``create`` journaled as ``{label}.model:{n}``; the rest is its."""

    def __init__(self, client: ChatCompletionClient, calls: AgentCalls) -> None:
        self.client = client
        self.calls = calls

    async def create(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> CreateResult:
        journal = self.calls.journal()
        identity = {
            "messages": [plain(m.model_dump(mode="json")) for m in messages],
            "tools": [tool_name(t) for t in tools],
            "tool_choice": tool_choice if isinstance(tool_choice, str) else tool_choice.name,
            "json_output": json_output
            if json_output is None or isinstance(json_output, bool)
            else json_output.__name__,
            "extra_create_args": plain(dict(extra_create_args)),
        }
        kwargs: dict[str, Any] = {
            "tools": tools,
            "tool_choice": tool_choice,
            "json_output": json_output,
            "extra_create_args": extra_create_args,
            "cancellation_token": cancellation_token,
        }
        ran: list[bool] = []
        record = await self.calls.step(
            journal,
            self.calls.model_key(journal),
            call_model,
            identity,
            unchecked((self.client, messages, kwargs, self.calls.cost, ran)),
        )
        if not ran and queued_replies(self.client):
            # The replayed call takes its reply off the test double's queue, as it did
            # when it ran, so the next fresh call gets the reply after it.
            await self.client.create(messages, **kwargs)
        return CreateResult.model_validate(record)

    async def create_stream(
        self,
        messages: Sequence[LLMMessage],
        *,
        tools: Sequence[Tool | ToolSchema] = [],
        tool_choice: Tool | Literal["auto", "required", "none"] = "auto",
        json_output: bool | type[BaseModel] | None = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: CancellationToken | None = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        yield await self.create(
            messages,
            tools=tools,
            tool_choice=tool_choice,
            json_output=json_output,
            extra_create_args=extra_create_args,
            cancellation_token=cancellation_token,
        )

    def dump_component(self) -> ComponentModel:
        """The wrapped client's configuration (a team's ``dump_component`` saves that)."""
        return self.client.dump_component()

    async def close(self) -> None:
        await self.client.close()

    def actual_usage(self) -> RequestUsage:
        return self.client.actual_usage()

    def total_usage(self) -> RequestUsage:
        return self.client.total_usage()

    def count_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []
    ) -> int:
        return self.client.count_tokens(messages, tools=tools)

    def remaining_tokens(
        self, messages: Sequence[LLMMessage], *, tools: Sequence[Tool | ToolSchema] = []
    ) -> int:
        return self.client.remaining_tokens(messages, tools=tools)

    @property
    def capabilities(self) -> ModelCapabilities:
        return self.client.capabilities

    @property
    def model_info(self) -> ModelInfo:
        return self.client.model_info
