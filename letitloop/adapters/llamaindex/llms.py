"""Each model call of a LlamaIndex agent run by ``LetItLoopRuntime`` is a step of its own.

The runtime records a workflow's ticks: a step whose result was recorded is
never run again. An agent's model call happens inside a step
(``run_agent_step``, the structured output of ``parse_agent_output``), and is
the paid part: :func:`journal_llms` makes each ``achat``/``astream_chat`` of the
agents' LLMs (the calls FunctionAgent, ReActAgent and structured output make,
``achat_with_tools`` included) a journal step while the workflow runs in a
journal, so that

- its token usage is reported with ``letitloop.usage`` when the call runs (from
  the response's ``raw`` usage or its ``additional_kwargs`` counts, as
  LlamaIndex's OpenAI, Anthropic and other integrations give them), reserved
  before it when the run has a budget (``reserving.reserve_call``), and
  ``letitloop.usage(...)`` called inside the LLM finds its step;
- a step killed after its model call returned makes no second call: the
  rerun of the step gets the recorded reply.

The step's key is ``{Workflow}.llm:{digest}``, the digest of the prompt (each
message as LlamaIndex dumps it) and of the tools offered; an identical prompt
asked again in the run is ``#2``. The reply is recorded as the runtime's
serializer writes it (message, delta, additional keywords; ``raw`` as JSON
data when it is JSON data or a pydantic model, else left out) and comes back
as a ``ChatResponse``. A streamed call is recorded whole: a fresh call hands
its chunks on once the stream has ended; a replayed one hands on one chunk,
the last.

The LLM objects are changed in place, once: their ``achat`` and
``astream_chat`` are replaced by journaling ones that call the original when
no journaled workflow run is going on (outside ``LetItLoopRuntime``, outside a
journal, or in another workflow).
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from ...errors import LetItLoopError
from ...identity.step_names import Named
from ...run.durable import usage
from ..agentcalls import digest, plain
from ..reserving import chat_prompt, max_tokens_of, reserve_call

if TYPE_CHECKING:
    from .journaled import JournaledRun

#: The journaled workflow run whose steps are running in this task (set by the runtime).
current_run: contextvars.ContextVar[JournaledRun | None] = contextvars.ContextVar(
    "letitloop_llamaindex_run", default=None
)

#: The attribute marking an LLM whose calls this module journals.
MARK = "_letitloop_journaled"


def agents_of(workflow: Any) -> list[Any]:
    """The agents of ``workflow``: itself if it is one, an AgentWorkflow's agents."""
    agents = getattr(workflow, "agents", None)
    if isinstance(agents, dict):
        return list(agents.values())
    return [workflow] if hasattr(workflow, "take_step") else []


def journal_llms(workflow: Any) -> None:
    """Journal the model calls of ``workflow``'s agents (once per LLM object)."""
    for agent in agents_of(workflow):
        llm = getattr(agent, "llm", None)
        if llm is None or llm.__dict__.get(MARK):
            continue
        chat, stream = llm.achat, llm.astream_chat
        object.__setattr__(llm, "achat", journaled_chat(llm, chat))
        object.__setattr__(llm, "astream_chat", journaled_stream(llm, stream))
        object.__setattr__(llm, MARK, True)


def identity(messages: Any, kwargs: dict[str, Any]) -> str:
    """The call's identity: the prompt as LlamaIndex dumps it, the tools, the other keywords."""
    tools = kwargs.get("tools") or []
    rest = {k: v for k, v in kwargs.items() if k != "tools"}
    return digest(
        {
            "messages": [m.model_dump(mode="json") for m in messages],
            "tools": [getattr(getattr(t, "metadata", None), "name", str(t)) for t in tools],
            "kwargs": plain(rest),
        }
    )


def model_name(llm: Any) -> str | None:
    """The LLM's model name, where its metadata gives one."""
    name = getattr(getattr(llm, "metadata", None), "model_name", None)
    return name if isinstance(name, str) and name != "unknown" else None


def reserve(llm: Any, messages: Any, kwargs: dict[str, Any]) -> None:
    """Reserve the call about to be made when the run has a budget (settled by ``report``)."""
    prompt = functools.partial(chat_prompt, messages, kwargs.get("tools"))
    reserve_call(prompt, lambda: max_tokens_of(kwargs, llm), model_name(llm), None)


def report(llm: Any, response: Any) -> None:
    """Report the response's token usage, if it carries any."""
    name = model_name(llm)
    for source in (getattr(response, "raw", None), getattr(response, "additional_kwargs", None)):
        if source is None:
            continue
        try:
            usage(source, model=name)
        except LetItLoopError:
            continue
        return


def record(run: JournaledRun, response: Any) -> dict[str, Any]:
    """A ChatResponse as the step records it."""
    ser = run.serializer
    raw = response.raw
    if hasattr(raw, "model_dump"):
        raw = raw.model_dump(mode="json")
    raw = plain(raw) if raw is None or isinstance(raw, (dict, list, str, int, float)) else None
    message = response.message
    return {
        "message": message.model_dump(mode="json"),
        "message_kwargs": {
            k: ser.serialize_value(v)  # type: ignore[attr-defined]
            for k, v in message.additional_kwargs.items()
        },
        "delta": response.delta,
        "additional_kwargs": plain(response.additional_kwargs),
        "raw": raw,
    }


def response_of(run: JournaledRun, row: dict[str, Any]) -> Any:
    """The ChatResponse a recorded row holds, its message's keywords with their types."""
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse

    ser = run.serializer
    message = ChatMessage.model_validate(row["message"])
    with ser.validation_context():
        message.additional_kwargs = {
            k: ser.deserialize_value(v)  # type: ignore[attr-defined]
            for k, v in row["message_kwargs"].items()
        }
    return ChatResponse(
        message=message,
        delta=row["delta"],
        additional_kwargs=row["additional_kwargs"],
        raw=row["raw"],
    )


def journaled_chat(llm: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    async def achat(messages: Any, **kwargs: Any) -> Any:
        run = current_run.get()
        if run is None or not run.journal.is_open:
            return await original(messages, **kwargs)

        async def call(_identity: str) -> dict[str, Any]:
            reserve(llm, messages, kwargs)
            response = await original(messages, **kwargs)
            report(llm, response)
            return record(run, response)

        call_id = identity(messages, kwargs)
        row = await run.journal.async_step(
            f"{run.prefix}llm:{call_id}", Named("letitloop:llamaindex.chat", call), call_id
        )
        return response_of(run, row)

    return achat


def journaled_stream(llm: Any, original: Callable[..., Any]) -> Callable[..., Any]:
    async def astream_chat(messages: Any, **kwargs: Any) -> Any:
        run = current_run.get()
        if run is None or not run.journal.is_open:
            return await original(messages, **kwargs)
        chunks: list[Any] = []

        async def call(_identity: str) -> dict[str, Any] | None:
            reserve(llm, messages, kwargs)
            async for chunk in await original(messages, **kwargs):
                chunks.append(chunk)
            if not chunks:
                return None
            report(llm, chunks[-1])
            return record(run, chunks[-1])

        call_id = identity(messages, kwargs)
        row = await run.journal.async_step(
            f"{run.prefix}llm:{call_id}", Named("letitloop:llamaindex.stream_chat", call), call_id
        )

        async def replies() -> AsyncIterator[Any]:
            if chunks:  # the call ran in this process: every chunk it gave
                for chunk in chunks:
                    yield chunk
            elif row is not None:  # replayed: the last chunk, the whole reply
                yield response_of(run, row)

        return replies()

    return astream_chat
