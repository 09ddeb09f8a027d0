"""What a request answered from its checkpoint yields, and which answers a thread takes.

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

import re
from typing import Any

from langgraph.pregel import Pregel

from ...errors import LetItLoopError

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


#: LangGraph's interrupt ids (xxh3 128-bit hex digests): a resume map's keys.
_IS_ID = re.compile(r"[0-9a-f]{32}")


def check_resume(graph: Pregel[Any, Any, Any, Any], thread: str, resume: Any) -> None:
    """Refuse, before anything is written, an answer to no question the thread asks now.

    ``Command(resume=value)`` answers the thread's pending ``interrupt()``;
    ``Command(resume={interrupt_id: value, ...})`` (LangGraph's map, keyed
    by 32-hex ids) answers those interrupts. An answer to an interrupt
    that is not pending (answered already, another thread's, a thread
    that moved on) would be dropped by LangGraph, or taken by the wrong
    question: LetItLoopError instead, the thread untouched.
    """
    state = graph.get_state({"configurable": {"thread_id": thread}})
    pending = {str(i.id): i for i in state.interrupts}
    if isinstance(resume, dict) and resume and all(_IS_ID.fullmatch(str(k)) for k in resume):
        unknown = sorted(str(k) for k in resume if str(k) not in pending)
    else:
        unknown = [] if pending else ["(the one pending)"]
    if not unknown:
        return
    asks = ", ".join(f"{i}: {v.value!r}"[:200] for i, v in pending.items()) or "nothing"
    raise LetItLoopError(
        f"thread {thread!r}: Command(resume=...) answers interrupt "
        f"{', '.join(unknown)}, which the thread is not waiting for; it waits for "
        f"{asks}. Nothing was written. Answer a pending interrupt (graph.get_state(config)"
        f".interrupts lists them with their ids), or invoke the thread with a new input"
    )
