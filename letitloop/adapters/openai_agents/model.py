"""``DurableModel``: an OpenAI Agents ``Model`` whose every ``get_response`` is a step.

The step's result is the ``ModelResponse`` (its output items, usage, response
and request ids) dumped by pydantic's ``TypeAdapter`` as JSON data, and
validated back into a ``ModelResponse`` on replay, usage included, so the
SDK's own counters add up as in an uninterrupted run. The usage is reported
once, when the call runs (``letitloop.usage``: tokens, model, and the cost
``cost=`` computes), and never again on replay. The call's identity is a
digest of the instructions, the input items, the names of the tools and
handoffs offered, the output schema and the conversation ids: a replay for a
different prompt is refused (StepMismatchError), never handed back.

Streaming (``Runner.run_streamed``): each streamed turn is a streamed step whose
chunks are journaled as they arrive (streaming.py): continued from the journaled
text after a kill (chat completions models), else restarted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelProvider, ModelTracing
from agents.tool import Tool
from openai.types.responses.response_prompt_param import ResponsePromptParam
from pydantic import TypeAdapter

from letitloop.adapters.agentcalls import Pricing, agent_mismatch, digest, plain
from letitloop.adapters.openai_agents.calls import journal_for, next_number
from letitloop.adapters.openai_agents.streaming import turn_events, turn_stream
from letitloop.adapters.reserving import max_tokens_of, reserve_call
from letitloop.errors import StepMismatchError
from letitloop.identity.step_names import named
from letitloop.identity.unchecked import unchecked
from letitloop.run.durable import usage

#: A response as JSON data and back; ``by_alias``: a field named after a Python
#: keyword (``async_``) is dumped under its JSON name, which validation reads.
RESPONSE = TypeAdapter(ModelResponse)


def model_name(model: Model) -> str | None:
    """The name the model was made for (``OpenAIResponsesModel.model``), if it says."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else None


@named("letitloop:openai_agents.model")
async def call_model(
    identity: str, call: tuple[Model, tuple[Any, ...], dict[str, Any], Pricing | None]
) -> dict[str, Any]:
    """The step's function: one real ``get_response``, its usage reported, the response dumped."""
    del identity  # the call's identity, for the journal's argument check only
    model, args, kwargs, cost = call
    name = model_name(model)
    settings = [a for a in (*args, *kwargs.values()) if isinstance(a, ModelSettings)]
    reserve_call((args, kwargs), partial(max_tokens_of, *settings), name, cost)
    response = await model.get_response(*args, **kwargs)
    spent = response.usage
    price = None if cost is None else cost(name, spent.input_tokens, spent.output_tokens)
    usage(
        input_tokens=spent.input_tokens,
        output_tokens=spent.output_tokens,
        model=name,
        cost=price,
    )
    dumped: dict[str, Any] = RESPONSE.dump_python(response, mode="json", by_alias=True)
    return dumped


class DurableModel(Model):
    """``model`` with each ``get_response`` journaled as ``{label}.model:{n}``.

    ``cost(model_name, input_tokens, output_tokens)``: what one call cost, in
    your currency (letitloop keeps no prices), reported with its tokens.
    Raises NoJournalError when called with no journal open.
    """

    def __init__(self, model: Model, *, label: str = "model", cost: Pricing | None = None):
        self.model = model
        self.label = label
        self.cost = cost

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        journal = journal_for(f"model call of {self.label!r}")
        identity = digest(
            {
                "instructions": system_instructions,
                "input": input,
                "tools": [tool.name for tool in tools],
                "handoffs": [h.tool_name for h in handoffs],
                "output_schema": None if output_schema is None else output_schema.name(),
                "previous_response_id": previous_response_id,
                "conversation_id": conversation_id,
            }
        )
        args = (
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
        )
        kwargs = {
            "previous_response_id": previous_response_id,
            "conversation_id": conversation_id,
            "prompt": prompt,
        }
        key = f"{self.label}.model:{next_number(journal, self.label)}"
        try:
            record = await journal.async_step(
                key, call_model, identity, unchecked((self.model, args, kwargs, self.cost))
            )
        except StepMismatchError as exc:
            # The prompt as the shared message shows it: its input items as the messages.
            said = {"messages": [input] if isinstance(input, str) else plain(input)}
            raise agent_mismatch(exc, self.label, key, said) from None
        return RESPONSE.validate_python(record)

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        journal = journal_for(f"streamed model call of {self.label!r}")
        identity = digest(
            {
                "instructions": system_instructions,
                "input": input,
                "tools": [tool.name for tool in tools],
                "handoffs": [h.tool_name for h in handoffs],
                "output_schema": None if output_schema is None else output_schema.name(),
                "previous_response_id": previous_response_id,
                "conversation_id": conversation_id,
            }
        )
        args = (system_instructions, input, model_settings, tools, output_schema, handoffs, tracing)
        kwargs = {
            "previous_response_id": previous_response_id,
            "conversation_id": conversation_id,
            "prompt": prompt,
        }
        key = f"{self.label}.model:{next_number(journal, self.label)}"
        stream = turn_stream(journal, key, identity, self.model, args, kwargs, self.cost)
        try:
            async for event in turn_events(stream):
                yield event
        except StepMismatchError as exc:
            said = {"messages": [input] if isinstance(input, str) else plain(input)}
            raise agent_mismatch(exc, self.label, key, said) from None

    async def close(self) -> None:
        await self.model.close()


class DurableModelProvider(ModelProvider):
    """Each model ``provider`` gives (OpenAI's by default) as a :class:`DurableModel`.

    For agents whose ``model`` is a name: ``RunConfig(model_provider=
    DurableModelProvider())``. Their calls are keyed ``model.model:{n}`` (one
    count for every agent of the run: the ``Runner`` calls them one at a time).
    """

    def __init__(
        self,
        provider: ModelProvider | None = None,
        *,
        label: str = "model",
        cost: Pricing | None = None,
    ) -> None:
        if provider is None:
            from agents.models.openai_provider import OpenAIProvider

            provider = OpenAIProvider()
        self.provider = provider
        self.label = label
        self.cost = cost

    def get_model(self, model_name: str | None) -> Model:
        model = self.provider.get_model(model_name)
        if isinstance(model, DurableModel):
            return model
        return DurableModel(model, label=self.label, cost=self.cost)

    async def aclose(self) -> None:
        await self.provider.aclose()
