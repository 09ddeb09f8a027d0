"""``RunSerializer``: the engine's JSON serializer, taught the values LlamaIndex agents keep.

The runtime records a workflow run's ticks and its context state with the
engine's own ``JsonSerializer`` (the serializer LlamaIndex uses for
``Context.to_dict``), restricted to the classes the workflow declares: a
recorded row never makes it import a class the journal file names. An agent
(``FunctionAgent``, ``ReActAgent``, ``AgentWorkflow``) keeps more than its
events in the context state, and this serializer knows those values too:

- chat messages (the agents' ``scratchpad``, ReAct's reasoning steps): the
  classes are allowed by name, and each comes back by its own
  ``model_validate`` from its ``model_dump``, as LlamaIndex restores them;
- the agents' ``memory``, a ``ChatMemoryBuffer`` on a ``SimpleChatStore``
  (the agents' default): recorded as its messages, token limit and key under
  a stable name of ours (``letitloop/chat-memory-buffer``), and rebuilt with
  ``ChatMemoryBuffer.from_defaults``. The engine would skip it (its JSON form
  fails) and resume the agents with an empty memory; another kind of memory
  is refused with EncodeError, saying what to do;
- a ``StopEvent`` whose result is one of the workflow's events (an
  ``AgentOutput``): the result keeps its type, so a finished run started
  again returns what the first start returned.
"""

from __future__ import annotations

import sys
from typing import Any

from workflows.context.serializers import JsonSerializer
from workflows.events import StopEvent

from ...errors import EncodeError

#: The key naming a chat memory in a recorded state (a stable name of ours, never a path).
MEMORY = "letitloop/chat-memory-buffer"
#: The key of a StopEvent whose result kept its type.
STOP = "letitloop/stop-event"


def agent_types() -> tuple[type[Any], ...]:
    """The classes of llama-index-core an agent keeps in its state, once it is imported.

    Nothing when the program never imported llama-index-core (a workflow
    without agents): then no value of these classes can be in its state, and
    the import (over a second of CPU) is not paid for.
    """
    if "llama_index.core" not in sys.modules:
        return ()
    try:
        from llama_index.core.agent.react.types import (
            ActionReasoningStep,
            ObservationReasoningStep,
            ResponseReasoningStep,
        )
        from llama_index.core.base.llms.types import ChatMessage, ChatResponse
        from llama_index.core.tools import ToolOutput, ToolSelection
    except ImportError:  # pragma: no cover - workflows without llama-index-core
        return ()
    return (
        ChatMessage,
        ChatResponse,
        ToolSelection,
        ToolOutput,
        ActionReasoningStep,
        ObservationReasoningStep,
        ResponseReasoningStep,
    )


def memory_record(serializer: JsonSerializer, value: Any) -> dict[str, Any] | None:
    """``value`` as a recorded chat memory, None when it is no memory of llama-index-core.

    Raises EncodeError for a memory this cannot rebuild as it was.
    """
    if "llama_index.core" not in sys.modules:
        return None
    try:
        from llama_index.core.memory import ChatMemoryBuffer
        from llama_index.core.memory.types import BaseMemory
        from llama_index.core.storage.chat_store import SimpleChatStore
    except ImportError:  # pragma: no cover - workflows without llama-index-core
        return None
    if not isinstance(value, BaseMemory):
        return None
    if type(value) is not ChatMemoryBuffer or type(value.chat_store) is not SimpleChatStore:
        store = getattr(value, "chat_store", None)
        raise EncodeError(
            f"the agents' memory is a {type(value).__name__}"
            + (f" on a {type(store).__name__}" if store is not None else "")
            + ", which LetItLoopRuntime cannot record and rebuild as it was (it records a "
            "ChatMemoryBuffer on its default SimpleChatStore, the agents' default memory); "
            "run the agent without memory= (or with ChatMemoryBuffer.from_defaults(...)), or "
            "without the runtime"
        )
    return {
        MEMORY: 1,
        "token_limit": value.token_limit,
        "chat_store_key": value.chat_store_key,
        "messages": [serializer.serialize_value(m) for m in value.get_all()],
    }


class RunSerializer(JsonSerializer):
    """JsonSerializer with the agents' memory, chat messages and typed stop results."""

    def with_types(self, *classes: type[Any]) -> JsonSerializer:
        names = (self._allowed_type_names or frozenset()) - self._registered_types.keys()
        registered = tuple(dict.fromkeys(self._registered_types.values()))
        return RunSerializer(allowed_types=(*registered, *names, *classes, *agent_types()))

    def serialize_value(self, value: Any) -> Any:
        if type(value) is StopEvent and self.keeps_type(value.result):
            return {STOP: 1, "result": self.serialize_value(value.result)}
        memory = memory_record(self, value)
        if memory is not None:
            return memory
        return super().serialize_value(value)

    def keeps_type(self, value: Any) -> bool:
        """Whether ``value``'s class comes back by name from this serializer."""
        cls = type(value)
        return f"{cls.__module__}.{cls.__qualname__}" in self._registered_types

    def deserialize_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            if data.get(STOP) == 1 and "result" in data:
                return StopEvent(result=self.deserialize_value(data["result"]))
            if data.get(MEMORY) == 1:
                from llama_index.core.memory import ChatMemoryBuffer

                return ChatMemoryBuffer.from_defaults(
                    chat_history=[self.deserialize_value(m) for m in data["messages"]],
                    token_limit=data["token_limit"],
                    chat_store_key=data["chat_store_key"],
                )
        return super().deserialize_value(data)
