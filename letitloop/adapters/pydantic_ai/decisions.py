"""What a wait for deferred tool calls takes, and which calls its answer approved.

``RequestInput`` waits for the JSON form of ``DeferredToolResults`` naming the
pending calls by their ids. The capability sees those calls
(``handle_deferred_tool_calls``) before ``RequestInput`` waits; the waiter
turns them into the wait's :class:`~letitloop.primitives.expects.Expect`: the ids of the
calls waiting for approval (``approvals``) and for an outside result
(``calls``), each required, no other id taken. ``lil send`` checks a value
against it, so an approval naming another call id is refused when it is
sent, the run untouched, instead of failing the run on every restart
(Pydantic AI raises ``UserError`` for an id that is not pending).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import DeferredToolRequests

from ...primitives.expects import Expect

#: An approval's value: true/false, or ``ToolApproved``/``ToolDenied`` as JSON.
_APPROVAL_VALUE: dict[str, Any] = {
    "anyOf": [
        {"type": "boolean"},
        {
            "type": "object",
            "properties": {"kind": {"enum": ["tool-approved", "tool-denied"]}},
            "required": ["kind"],
        },
    ]
}


def call_text(call: ToolCallPart) -> str:
    """``refund(order=7, amount=30)``: a tool call as the stop line shows it."""
    try:
        args = call.args_as_dict()
    except ValueError:
        args = {}
    shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in args.items())
    return f"{call.tool_name}({shown})"


def _ids_object(ids: list[str], values: dict[str, Any] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "propertyNames": {"enum": ids},
        "required": ids,
    }
    if values is not None:
        schema["additionalProperties"] = values
    return schema


def expect_for(requests: DeferredToolRequests) -> Expect:
    """What the wait for ``requests`` takes: every pending id answered, no other id."""
    approvals = [c.tool_call_id for c in requests.approvals]
    calls = [c.tool_call_id for c in requests.calls]
    every = approvals + calls
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "approvals": _ids_object(approvals, _APPROVAL_VALUE),
            "calls": _ids_object(calls),
            "metadata": {"type": "object", "propertyNames": {"enum": every}},
            "answered_by": {"type": "object", "propertyNames": {"enum": every}},
        },
        "required": (["approvals"] if approvals else []) + (["calls"] if calls else []),
    }
    parts = [f"approval of {call_text(c)}, call {c.tool_call_id!r}" for c in requests.approvals]
    parts += [f"the result of {call_text(c)}, call {c.tool_call_id!r}" for c in requests.calls]
    example: dict[str, Any] = {}
    if approvals:
        example["approvals"] = dict.fromkeys(approvals, True)
    if calls:
        example["calls"] = dict.fromkeys(calls, "RESULT")
    return Expect(schema, "; ".join(parts), example)


def requests_in(ask: Any) -> DeferredToolRequests | None:
    """The pending calls ``RequestInput`` bound into the ``ask`` it handed the waiter, if
    they can be found there (``functools.partial(self._ask, ctx, requests)`` inside
    Pydantic AI's ``ask_with_token`` closure); None otherwise.

    For a ``RequestInput`` listed before ``LetItLoopDurability`` in ``capabilities``,
    whose hook then answers before the capability's ``handle_deferred_tool_calls``
    could note the calls.
    """
    for cell in getattr(ask, "__closure__", None) or ():
        try:
            bound = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        for value in getattr(bound, "args", ()):
            if isinstance(value, DeferredToolRequests):
                return value
    return None


def approved_ids(answer: Any) -> set[str]:
    """The call ids a decision (``DeferredToolResults`` as JSON) approved."""
    if not isinstance(answer, dict) or not isinstance(answer.get("approvals"), dict):
        return set()
    approved = set()
    for call_id, value in answer["approvals"].items():
        if value is True or (isinstance(value, dict) and value.get("kind") == "tool-approved"):
            approved.add(call_id)
    return approved
