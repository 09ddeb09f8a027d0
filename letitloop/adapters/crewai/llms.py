"""A CrewAI model's calls as journal steps: the answer recorded once, replayed ever after.

:func:`wrap_llm` replaces ``call`` on one ``BaseLLM`` instance (the class and
other instances are untouched). Under a kickoff of a wrapped crew
(``calls.active``), each call is the step ``llm:<agent role>:<digest>``
whose identity is the model, the messages, the tools offered and the
response model; its recorded result is the answer in a plain form (text, tool calls
as OpenAI-style dicts with their call ids, a response model's fields) and the
token usage the provider reported to CrewAI for that call. A fresh call
reports its usage with ``letitloop.usage`` (so ``lil show`` counts its tokens
and what replay saved); a replayed one adds the recorded usage to the
model's own counters again, so ``crew.usage_metrics`` is what an
uninterrupted run reports. The answer handed to CrewAI is the same plain
form in both cases, so a resumed agent sees exactly what the first attempt
saw.

Not journaled: ``acall`` (CrewAI's async kickoffs) and streaming chunks
(a streamed call is journaled as its final answer; the chunks are not
replayed).
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from functools import partial
from typing import Any

from crewai.llms.base_llm import BaseLLM
from crewai.types.usage_metrics import UsageMetrics
from crewai.utilities.agent_utils import extract_tool_call_info, is_tool_call_list
from pydantic import BaseModel

from ...identity.step_names import named
from ...run.durable import usage
from ..reserving import max_tokens_of, reserve_call
from .calls import active, journaled, step_name

#: The usage reports of the model call running in this context (None: none running).
_reports: ContextVar[list[dict[str, Any]] | None] = ContextVar(
    "letitloop_crewai_usage", default=None
)

#: Marks an instance whose ``call`` is already the journaled one (a model: its ``id``, as
#: a copy of a wrapped model carries its original's wrappers, bound to the original).
WRAPPED = "_letitloop_wrapped"
#: The attribute of a wrapper function holding what it wrapped.
ORIGINAL = "_letitloop_original"


def own(llm: BaseLLM, name: str) -> Any:
    """``llm``'s method ``name`` as it was before wrapping: a (shallow or deep) copy of a
    wrapped model holds its original's wrappers, whose original method is rebound here."""
    found = getattr(llm, name)
    inner = getattr(found, ORIGINAL, None)
    if inner is None:
        return found
    function, bound_to = getattr(inner, "__func__", None), getattr(inner, "__self__", None)
    return function.__get__(llm) if function is not None and bound_to is not None else inner


def plain(value: Any) -> Any:
    """``value`` as JSON values: what identifies a call (models by their fields, else text)."""

    def default(obj: Any) -> Any:
        if isinstance(obj, BaseModel):
            return obj.model_dump(mode="json")
        if isinstance(obj, type):
            return f"{obj.__module__}.{obj.__qualname__}"
        return str(obj)

    return json.loads(json.dumps(value, default=default, sort_keys=True))


def tool_names(tools: Any) -> list[str]:
    """The names of the tool schemas offered to a call (their descriptions are in the prompt)."""
    names = []
    for schema in tools or []:
        function = schema.get("function", schema) if isinstance(schema, dict) else schema
        name = function.get("name") if isinstance(function, dict) else None
        names.append(str(name if name is not None else getattr(schema, "name", schema)))
    return names


def recorded_answer(answer: Any) -> dict[str, Any]:
    """A model's answer in the form the journal records and CrewAI is handed."""
    if isinstance(answer, str):
        return {"text": answer}
    if isinstance(answer, list) and is_tool_call_list(answer):
        calls = []
        for tool_call in answer:
            info = extract_tool_call_info(tool_call)
            if info is None:  # pragma: no cover - is_tool_call_list accepted it
                raise TypeError(f"unreadable tool call in a model's answer: {tool_call!r}")
            call_id, name, arguments = info
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, sort_keys=True)
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
        return {"tool_calls": calls}
    if isinstance(answer, BaseModel):
        return {"model": answer.model_dump(mode="json")}
    return {"value": answer}


def handed_back(recorded: dict[str, Any], response_model: Any) -> Any:
    """What CrewAI gets for a recorded answer (the same for a fresh call and a replay)."""
    if "text" in recorded:
        return recorded["text"]
    if "tool_calls" in recorded:
        return [dict(c, function=dict(c["function"])) for c in recorded["tool_calls"]]
    if "model" in recorded:
        if isinstance(response_model, type) and issubclass(response_model, BaseModel):
            return response_model.model_validate(recorded["model"])
        return recorded["model"]
    return recorded["value"]


class ModelCall:
    """One call of a wrapped model: the live objects the step's function needs."""

    def __init__(self, llm: BaseLLM, original: Any, kwargs: dict[str, Any]) -> None:
        self.llm = llm
        self.original = original
        self.kwargs = kwargs
        #: Set by model_call: the call ran in this attempt (False: replayed).
        self.ran = False


@named("letitloop:crewai.llm")
def model_call(call: ModelCall, identity: Any) -> dict[str, Any]:
    """The step's function: call the model, report its usage, return its recorded form."""
    limit = partial(max_tokens_of, call.llm)
    reserve_call(identity, limit, call.llm.model, None)  # settled by usage() below
    token = _reports.set([])
    try:
        answer = call.original(**call.kwargs)
        reports = _reports.get() or []
    finally:
        _reports.reset(token)
    call.ran = True
    recorded = recorded_answer(answer)
    recorded["usage"] = plain(reports)
    prompt = completion = 0
    for report in reports:
        metrics = UsageMetrics.from_provider_dict(report)
        if metrics is not None:
            prompt += metrics.prompt_tokens
            completion += metrics.completion_tokens
    if reports:
        usage(input_tokens=prompt, output_tokens=completion, model=call.llm.model)
    return recorded


def wrap_llm(llm: BaseLLM) -> BaseLLM:
    """Make ``llm``'s calls journal steps under a wrapped crew's kickoff; returns ``llm``.

    Wrapping twice is wrapping once; a copy of a wrapped model (CrewAI copies
    a crew's models for ``kickoff_for_each``) is wrapped anew, its own. The
    instance keeps its class, fields and behaviour outside a kickoff.
    """
    if getattr(llm, WRAPPED, None) == id(llm):
        return llm
    original = own(llm, "call")
    track = own(llm, "_track_token_usage_internal")

    def journaled_call(
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        kwargs = {
            "messages": messages,
            "tools": tools,
            "callbacks": callbacks,
            "available_functions": available_functions,
            "from_task": from_task,
            "from_agent": from_agent,
            "response_model": response_model,
        }
        session = active.get()
        if session is None:
            return original(**kwargs)
        role = getattr(from_agent, "role", None) or "crew"
        identity = {
            "model": llm.model,
            "messages": plain(messages),
            "tools": tool_names(tools),
            "response_model": plain(response_model),
        }
        call = ModelCall(llm, original, kwargs)
        recorded = journaled(session, f"llm:{step_name(role)}", model_call, call, identity)
        if not call.ran:  # replayed: the model's own counters as if it had been called
            for report in recorded.get("usage") or []:
                track(report)
        return handed_back(recorded, response_model)

    def tracking(usage_data: dict[str, Any]) -> None:
        track(usage_data)
        reports = _reports.get()
        if reports is not None and isinstance(usage_data, dict):
            reports.append(dict(usage_data))

    # Instance attributes: they shadow the class's methods for this instance only
    # (object.__setattr__: pydantic would refuse a name that is not a field).
    setattr(journaled_call, ORIGINAL, original)
    setattr(tracking, ORIGINAL, track)
    object.__setattr__(llm, "call", journaled_call)
    object.__setattr__(llm, "_track_token_usage_internal", tracking)
    object.__setattr__(llm, WRAPPED, id(llm))
    return llm
