"""``DurableModel``: a smolagents ``Model`` whose every ``generate`` is a journal step.

The step's result is the reply as plain data (role, content, tool calls,
token usage) and comes back as a ``ChatMessage``; its ``raw`` (the provider's
own response object) is not kept. The call's identity is the prompt (each
message's role, content and tool calls), the stop sequences, the response
format, the names of the tools offered and the other keyword arguments.
The reply's token usage is reported with ``letitloop.usage``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
    get_dict_from_nested_dataclasses,
)
from smolagents.monitoring import TokenUsage

from letitloop.adapters.agentcalls import Pricing, plain
from letitloop.adapters.reserving import max_tokens_of, reserve_call
from letitloop.adapters.smolagents.calls import AgentCalls
from letitloop.identity.step_names import named
from letitloop.identity.unchecked import unchecked
from letitloop.run.durable import usage


def message_identity(message: Any) -> Any:
    """A prompt message as plain data: role, content and tool calls (no usage, no raw)."""
    if isinstance(message, ChatMessage):
        data = get_dict_from_nested_dataclasses(message, ignore_key="raw")
        data.pop("token_usage", None)
        return plain(data)
    return plain(message)


def reply_record(message: ChatMessage) -> dict[str, Any]:
    """The reply as the step records it."""
    role = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
    calls = [
        {
            "id": call.id,
            "type": call.type,
            "function": {
                "name": call.function.name,
                "arguments": plain(call.function.arguments),
                "description": call.function.description,
            },
        }
        for call in message.tool_calls or []
    ]
    spent = message.token_usage
    return {
        "role": role,
        "content": plain(message.content),
        "tool_calls": calls if message.tool_calls is not None else None,
        "token_usage": None
        if spent is None
        else {"input_tokens": spent.input_tokens, "output_tokens": spent.output_tokens},
    }


def reply_message(record: dict[str, Any]) -> ChatMessage:
    """The ``ChatMessage`` a recorded reply stands for (a new object each time)."""
    calls = record["tool_calls"]
    spent = record["token_usage"]
    return ChatMessage(
        role=MessageRole(record["role"]),
        content=record["content"],
        tool_calls=None
        if calls is None
        else [
            ChatMessageToolCall(
                function=ChatMessageToolCallFunction(**c["function"]), id=c["id"], type=c["type"]
            )
            for c in calls
        ],
        token_usage=None if spent is None else TokenUsage(**spent),
    )


#: A model call as the step gets it: the real model, the prompt, the other arguments
#: and the user's pricing.
ModelCall = tuple[Model, list[Any], dict[str, Any], Pricing | None]


@named("letitloop:smolagents.model")
def call_model(identity: Any, call: ModelCall) -> dict[str, Any]:
    """The step's function: one real model call, its usage (and cost) reported."""
    del identity  # the call's identity, for the journal's argument check only
    model, messages, kwargs, cost = call
    limit = partial(max_tokens_of, kwargs, getattr(model, "kwargs", None))
    reserve_call(messages, limit, model.model_id or None, cost)  # settled by usage() below
    reply = model.generate(messages, **kwargs)
    spent = reply.token_usage
    if spent is not None:
        name = model.model_id or None
        usage(
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            model=name,
            cost=None if cost is None else cost(name, spent.input_tokens, spent.output_tokens),
        )
    return reply_record(reply)


class DurableModel(Model):
    """``model`` with each ``generate`` journaled as step ``{label}.model`` (numbered).

    Streaming is not journaled: this model has no ``generate_stream``, so an
    agent with ``stream_outputs=True`` calls ``generate`` (one reply, whole).
    Everything else (``model_id``, ``parse_tool_calls``, …) is ``model``'s.
    """

    def __init__(self, model: Model, calls: AgentCalls) -> None:
        super().__init__(
            flatten_messages_as_text=model.flatten_messages_as_text,
            tool_name_key=model.tool_name_key,
            tool_arguments_key=model.tool_arguments_key,
            model_id=model.model_id,
            **model.kwargs,
        )
        self.model = model
        self.calls = calls

    def __getattr__(self, name: str) -> Any:
        # Only attributes this class lacks; generate_stream stays missing, so
        # agents call generate (journaled) rather than stream past the journal.
        model = self.__dict__.get("model")
        if model is None or name == "generate_stream" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(model, name)

    def generate(
        self,
        messages: list[ChatMessage],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:
        if self.calls.refusal is not None:  # smolagents made it an observation: end the run
            raise self.calls.refusal
        identity = {
            "messages": [message_identity(m) for m in messages],
            "stop_sequences": stop_sequences,
            "response_format": plain(response_format),
            "tools": [getattr(t, "name", None) for t in tools_to_call_from or []],
            "kwargs": plain(kwargs),
        }
        call_kwargs = dict(
            kwargs,
            stop_sequences=stop_sequences,
            response_format=response_format,
            tools_to_call_from=tools_to_call_from,
        )
        record = self.calls.step(
            f"{self.calls.label}.model",
            call_model,
            identity,
            unchecked((self.model, messages, call_kwargs, self.calls.cost)),
        )
        return reply_message(record)

    def parse_tool_calls(self, message: ChatMessage) -> ChatMessage:
        return self.model.parse_tool_calls(message)
