"""What every adapter's model call reserves before it is made, when its run has a budget.

Each adapter's model-call step calls :func:`reserve_call` just before the
framework's model call, and reports the call's usage after it: the report
settles the reservation (letitloop/primitives/reservations.py). The prompt is measured
only when the run has a budget: without one this is one context-variable
read and one attribute test.

A chat model's prompt is measured by what the provider bills
(:func:`chat_prompt`): the messages' text, their tool calls and the tools'
schemas, not the framework's message objects (ids, metadata and the like,
which no provider is sent).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from letitloop.primitives.estimates import Reservation
from letitloop.primitives.reservations import reserve
from letitloop.run.steps import parent_step

#: The names frameworks give the most output a call may produce, first match wins.
MAX_TOKENS_KEYS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "max_new_tokens")


#: Bytes counted per message for the chat template's framing (its role markers and
#: separators: OpenAI's format spends 3 to 4 tokens a message, Llama's about as many).
FRAMING = 8


def _text_of(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts
    (``{"type": "text", "text": ...}`` dicts, or objects with a ``text``); another part
    (an image, a file) as its JSON, which stands for it, text or not."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "\n".join(_text_of(part) for part in content)
    if isinstance(content, Mapping):
        text = content.get("text")
        if isinstance(text, str):
            return text
        return json.dumps(content, default=str, ensure_ascii=False)
    text = getattr(content, "text", None)
    if isinstance(text, str):
        return text
    return str(content)


def _calls_of(message: Any) -> list[Any]:
    """The tool calls a message carries (LangChain's ``tool_calls``, an OpenAI-style
    ``additional_kwargs["tool_calls"]`` as LlamaIndex keeps them)."""
    calls = getattr(message, "tool_calls", None)
    if calls:
        return list(calls)
    extra = getattr(message, "additional_kwargs", None)
    if isinstance(extra, Mapping) and extra.get("tool_calls"):
        return list(extra["tool_calls"])
    return []


def chat_prompt(messages: Iterable[Any], tools: Any = None) -> str:
    """The text a provider bills as a chat call's input: for each message its role, its
    content's text and its tool calls (name and arguments), and the tools' schemas.

    Measured in UTF-8 bytes (``estimates.prompt_tokens``), an upper bound of the
    tokens of any byte-level BPE tokenizer; each message adds :data:`FRAMING`. What a
    framework's message object carries and no provider is sent (ids, metadata,
    response details) is left out: measured as the objects' JSON, a LangGraph
    agent's prompt was estimated at 10 to 20 times what it was billed.
    """
    parts = []
    for m in messages:
        role = getattr(m, "type", None) or getattr(m, "role", None) or ""
        role = getattr(role, "value", role)  # LlamaIndex's MessageRole
        content = getattr(m, "content", None)
        if content is None and isinstance(m, Mapping):
            content = m.get("content")
        calls = _calls_of(m)
        parts.append(" " * FRAMING + str(role) + _text_of(content))
        if calls:
            parts.append(json.dumps(calls, default=str, ensure_ascii=False, sort_keys=True))
    if tools:
        parts.append(json.dumps(tools, default=_schema, ensure_ascii=False, sort_keys=True))
    return "".join(parts)


def _schema(tool: Any) -> Any:
    """A tool as a provider is sent it: its name, description and parameters' schema, as
    far as the object tells them; else its text."""
    for attr in ("tool_call_schema", "args_schema"):
        schema = getattr(tool, attr, None)
        if schema is not None and hasattr(schema, "model_json_schema"):
            return {
                "name": getattr(tool, "name", None),
                "description": getattr(tool, "description", None),
                "parameters": schema.model_json_schema(),
            }
    metadata = getattr(tool, "metadata", None)
    if metadata is not None and hasattr(metadata, "to_openai_tool"):
        return metadata.to_openai_tool()
    return str(tool)


def max_tokens_of(*sources: Any) -> int | None:
    """The first output limit found in ``sources`` (dicts or objects: call arguments, model
    settings, a model's own settings), None when none sets one."""
    for source in sources:
        if source is None:
            continue
        for name in MAX_TOKENS_KEYS:
            found = source.get(name) if isinstance(source, Mapping) else None
            value = found if isinstance(source, Mapping) else getattr(source, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    return None


def reserve_call(
    prompt: Any,
    max_tokens: Callable[[], int | None],
    model: str | None,
    price: Callable[[str | None, int, int], float] | None,
) -> Reservation | None:
    """Reserve the model call about to be made on the journal of the step running it
    (``letitloop.reserve``); None, and nothing measured, when its run has no budget.

    ``max_tokens`` is asked only then, and ``prompt`` called for the prompt when it
    is a function (:func:`chat_prompt`'s work is done only for a budget). Raises
    BudgetExceededError when the call does not fit in what remains of the budget: the
    call must not be made.
    """
    running = parent_step.get()
    if running is None or running[0]._budget is None:
        return None
    if callable(prompt):
        prompt = prompt()
    return reserve(prompt, max_tokens=max_tokens(), model=model, price=price)
