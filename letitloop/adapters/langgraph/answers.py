"""What a request answered from its checkpoint yields: LangGraph's stream of a finished thread.

An invocation that is a request already answered (``requests.py``) does not
run the graph: its ``invoke`` returns, and its ``stream`` yields, what
LangGraph yields for a thread at that checkpoint with nothing left to run:
the state once (``"values"``, filtered to the graph's output keys) and, when
the request stopped at an ``interrupt()``, the interrupts first
(``"updates"``). Nothing ran, so no messages, tasks, checkpoints or custom
events; ``subgraphs=True`` and ``version="v2"`` give the same parts in their
shapes.
"""

from __future__ import annotations

from typing import Any

from langgraph.pregel import Pregel

try:  # LangGraph's name for the key; a literal if a release moves it
    from langgraph._internal._constants import INTERRUPT
except ImportError:  # pragma: no cover
    INTERRUPT = "__interrupt__"


def payloads(
    graph: Pregel[Any, Any, Any, Any],
    snapshot: Any,
    stream_mode: Any,
    output_keys: Any,
    subgraphs: bool,
    version: str,
) -> list[Any]:
    """What LangGraph's stream yields for a thread already at ``snapshot`` with nothing to run."""
    keys = graph.output_channels if output_keys is None else output_keys
    values = snapshot.values
    if isinstance(keys, str):
        if isinstance(values, dict) and not isinstance(graph.stream_channels_asis, str):
            values = values.get(keys)
    elif isinstance(values, dict):
        values = {k: v for k, v in values.items() if k in keys}
    interrupts = tuple(snapshot.interrupts)
    modes = graph.stream_mode if stream_mode is None else stream_mode
    several = not isinstance(modes, str)
    wanted = list(modes) if several else [modes]
    out: list[Any] = []
    # LangGraph reports an interrupt (updates) before the state it left (values).
    for mode in sorted(wanted, key=lambda m: m != "updates"):
        if mode == "updates" and interrupts:
            payload: Any = {INTERRUPT: interrupts}
        elif mode == "values":
            payload = values
        else:
            continue  # nothing ran: no messages, tasks, checkpoints or custom events
        if version == "v2":
            part = {"type": mode, "ns": (), "data": payload}
            out.append({**part, "interrupts": interrupts} if mode == "values" else part)
        elif several:
            out.append(((), mode, payload) if subgraphs else (mode, payload))
        else:
            out.append(((), payload) if subgraphs else payload)
    return out
