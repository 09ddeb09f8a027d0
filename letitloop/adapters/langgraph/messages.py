"""LangChain's messages as step results, and as arguments whose ids do not count.

Importing ``letitloop.adapters.langgraph`` registers LangChain's message
classes (every ``BaseMessage`` subclass LangChain ships, their chunks, and
``Document``) with the codec's default registry, so ``step("ask", llm.invoke,
prompt)`` records the ``AIMessage`` it returns and a replay hands back an equal
``AIMessage``: content (text or blocks), tool calls, invalid tool calls, tool
call chunks, usage metadata, response metadata, name and id. Tool calls and
usage metadata are LangChain ``TypedDict``s, that is plain dicts, and come back
as such.

Message ids are bookkeeping, not content: LangGraph's ``add_messages`` gives a
message without an id a fresh ``uuid4`` each time the message is written, so
the same conversation rebuilt after a crash carries other ids. A durable
node's fingerprints (of its input, and of its steps' arguments) therefore
leave a message's ``id`` out; everything else in the message counts.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from langgraph.types import Command, Send

from ...codec import CodecRegistry, default_registry

#: The classes registered: a step's result may hold any of them, nested anywhere.
MESSAGE_TYPES: tuple[type[BaseMessage], ...] = (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
    FunctionMessage,
    FunctionMessageChunk,
    ChatMessage,
    ChatMessageChunk,
    RemoveMessage,
)
LANGCHAIN_TYPES: tuple[type, ...] = (*MESSAGE_TYPES, Document)


def register_langchain_types(registry: CodecRegistry | None = None) -> CodecRegistry:
    """Register LangChain's message classes and ``Document`` with ``registry``; returns it.

    ``registry`` defaults to the codec's default registry (what this package
    does on import). A class already registered there is left as it is, so
    a registration of your own wins. Stored under their module path, e.g.
    ``{"!langchain_core.messages.ai.AIMessage": {"content": …, "tool_calls": […], …}}``.
    """
    reg = default_registry if registry is None else registry
    for cls in LANGCHAIN_TYPES:
        if cls not in reg:
            reg.register(cls)
    # What a tool may return to a ToolNode (durable_node(ToolNode(...)) records it).
    if Command not in reg:
        reg.register(Command, name="langgraph.types.Command")
    if Send not in reg:
        reg.register(Send, name="langgraph.types.Send", encode=_send_fields, decode=_send)
    return reg


def _send_fields(send: Send) -> dict[str, Any]:
    if send.timeout is not None:
        raise TypeError(
            "a Send with a timeout cannot be recorded; return the Send without timeout= "
            "from the tool, or set the timeout on the node"
        )
    return {"node": send.node, "arg": send.arg}


def _send(fields: dict[str, Any]) -> Send:
    return Send(fields["node"], fields["arg"])


def with_langchain_types(registry: CodecRegistry | None) -> CodecRegistry | None:
    """``registry`` if it knows LangChain's types (or is the default), else one that adds them."""
    if registry is None or all(cls in registry for cls in (*LANGCHAIN_TYPES, Command, Send)):
        return registry
    return register_langchain_types(CodecRegistry(extends=registry))


def _fingerprint_only(payload: Any) -> Any:
    raise TypeError("this registry computes fingerprints; it never decodes")


def _without_id(cls: type[BaseMessage]) -> Any:
    names = tuple(n for n in cls.model_fields if n != "id")

    def encode(message: Any) -> Any:
        out = {n: getattr(message, n) for n in names}
        extra = message.__pydantic_extra__
        if extra:
            out.update(extra)
        return out

    return encode


def fingerprint_registry(registry: CodecRegistry | None) -> CodecRegistry:
    """A registry for fingerprints only: ``registry``'s types, LangChain messages without ids."""
    base = default_registry if registry is None else registry
    fp = CodecRegistry(extends=base)
    for cls in MESSAGE_TYPES:
        # The same stored name as the codec's entry, so only the id is left out.
        fp.register(
            cls,
            name=f"{cls.__module__}.{cls.__qualname__}",
            encode=_without_id(cls),
            decode=_fingerprint_only,
        )
    return fp
