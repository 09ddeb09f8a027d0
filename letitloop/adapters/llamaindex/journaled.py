"""One LlamaIndex workflow run in a journal: its ticks recorded as steps, and read back.

``JournaledRun`` records each tick as a step keyed by its number in the workflow
run and what it is (``Pipeline.00004:step_result:count``), with the context
state beside a step's result when it changed, and the StopEvent with its
result's type; ``replay`` reads them back through the journal (replayed steps:
nothing is called). ``final_event`` finds a finished run's StopEvent.

The engine starts every session of a run (its first, and each resume) with a
``session_start`` tick. The first is tick 0; a resume's takes no number of its
own: it is kept in the row of the tick after it (``session``) and read back
before that tick, so a resumed run's ticks keep the numbers (and keys) of the
run the kill interrupted, whatever the tick it resumed after.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from typing import Any, cast

from workflows.context.serializers import BaseSerializer
from workflows.events import StopEvent
from workflows.runtime.types.results import StepWorkerResult
from workflows.runtime.types.ticks import (
    TickSessionStart,
    TickStepResult,
    WorkflowTick,
    WorkflowTickAdapter,
)

from ...errors import DecodeError
from ...identity.step_names import named
from ...identity.unchecked import unchecked
from ...run.journal import Journal, location_of
from .restore import Rewound


@named("letitloop:llamaindex.tick")
async def tick(row: dict[str, Any]) -> dict[str, Any]:
    """A tick's step function: the tick (and the state after a step) as recorded."""
    return row


def label(t: WorkflowTick) -> str:
    """What a tick's key says after its number: its type, and the step it is for."""
    step = getattr(t, "step_id", None)
    return f"{t.type}:{step}" if step else t.type


class JournaledRun:
    """One workflow run in a journal: its keys' prefix, its next tick's number, its state.

    Owned by the run's internal adapter once the run starts (the control loop
    calls ``on_tick`` one tick at a time), by ``LetItLoopRuntime.run_workflow``
    before.
    """

    def __init__(self, journal: Journal, prefix: str, serializer: BaseSerializer) -> None:
        self.journal = journal
        self.prefix = prefix
        self.serializer = serializer
        self.seq = 0
        #: The StopEvent recorded with its result's type (``record``), once read back.
        self.stop: Any = None
        #: Sends of step runs that were in flight when the process died, already routed:
        #: (step name, work item) -> the sends' numbers (see ``JournalingAdapter.send_event``).
        self.routed: dict[tuple[str, str | None], set[int]] = {}
        #: Sends dropped as routed already, by the invocation that made them again.
        self.dropped: dict[str, set[int]] = {}
        #: The context state last recorded (JSON text), to record it only when it changed.
        self.state_text: str | None = None
        #: A resume's session start, recorded in the row of the next tick (``hold``).
        self.session: WorkflowTick | None = None
        #: The key each replayed tick was read from (a session start: its next tick's).
        self.keys: list[str] = []
        #: The worker tasks started, numbered in order (``JournalingAdapter.rank``).
        self.dispatched: dict[asyncio.Task[Any], int] = {}
        self.dispatches = itertools.count()
        #: The steps in flight at the kill, restarted by this resume (restore.py).
        self.rewound = Rewound(None, serializer)

    def recorded_keys(self) -> dict[int, str]:
        """This run's recorded tick keys by number (read-only, from the journal file)."""
        # Only a resume reads them: a first run does not load the inspector (~20 ms).
        from ...inspection import open_inspector

        journal = self.journal
        # As given (a URL stays a URL; journal.path is a file's path), else the file found.
        where = location_of(journal)
        inspector = open_inspector(journal.path if where is None else os.fspath(where))
        try:
            keys = inspector.step_keys(self.journal.run_id, self.prefix)
        finally:
            inspector.close()
        by_number: dict[int, str] = {}
        for key in keys:
            number = key[len(self.prefix) :].split(":", 1)[0]
            if number.isdigit():
                by_number[int(number)] = key
        return by_number

    def replay(self) -> tuple[list[WorkflowTick], dict[str, Any] | None]:
        """The ticks recorded for this run, in order, and the last context state recorded.

        Each comes back through the journal (a replayed step): nothing is
        called. Numbering goes on after them. Raises DecodeError naming the
        key when a recorded tick cannot be read back with this workflow's
        serializer (nothing runs, nothing is written).
        """
        journal = self.journal
        if journal.attempt == 1 and not journal.was_completed:
            return [], None  # a run this process started: nothing recorded before
        keys = self.recorded_keys()
        ticks: list[WorkflowTick] = []
        state: dict[str, Any] | None = None
        while self.seq in keys:
            # Replayed, never called (the key is recorded): the recorded row comes back.
            key = keys[self.seq]
            row = cast("dict[str, Any]", self.journal.step(key, tick, unchecked(None)))
            try:
                with self.serializer.validation_context():
                    for data in (row.get("session"), row["tick"]):
                        if data is not None:  # a resume's session start, then the tick
                            ticks.append(
                                WorkflowTickAdapter.validate_python(
                                    self.serializer.deserialize(json.dumps(data))
                                )
                            )
                            self.keys.append(key)
                    if "stop" in row:
                        self.stop = self.serializer.deserialize(json.dumps(row["stop"]))
            except (ValueError, TypeError, KeyError) as exc:
                raise self.unreadable(key, exc) from exc
            if row.get("state") is not None:
                state = row["state"]
            self.seq += 1
        if state is not None:
            self.state_text = json.dumps(state, sort_keys=True)
        return ticks, state

    def unreadable(self, key: str, exc: BaseException) -> DecodeError:
        """The error for a recorded tick or state this workflow cannot read back."""
        journal = self.journal
        return DecodeError(
            f"workflow {self.prefix.rstrip('.')!r} in run {journal.run_id} of goal "
            f"{journal.goal!r}: step {key!r} was recorded with a value this workflow cannot "
            f"read back ({exc}); run it with the workflow (agents, events, state type) that "
            f"recorded it, or reset it with 'lil reset {journal.goal} --run {journal.run_id}'"
        )

    def hold(self, t: WorkflowTick) -> bool:
        """Keep ``t`` for the row of the next tick if it is a resume's session start.

        The first session's start is tick 0; a resume's would take the number
        of the tick the interrupted run recorded next and push every later
        tick's key one further than in a run not interrupted (a key of the
        uninterrupted run made under another number). Held, it is recorded
        with the next tick and read back before it (``replay``); a kill before
        that tick is recorded loses it with the rest of the session, as if the
        session had not started.
        """
        if isinstance(t, TickSessionStart) and self.seq > 0:
            self.session = t
            return True
        return False

    async def record(self, t: WorkflowTick, state: dict[str, Any] | None) -> None:
        """Record tick ``t`` as the run's next step (committed when this returns).

        A step result that returned a StopEvent also keeps that event in the
        row (``stop``) as this serializer writes it, so its result comes back
        with its type (an agent's ``AgentOutput``), where the tick's own JSON
        form holds it as a dict. A session start held (``hold``) goes in the
        row too (``session``).
        """
        row: dict[str, Any] = {"tick": json.loads(self.serializer.serialize(t))}
        if self.session is not None:
            row["session"] = json.loads(self.serializer.serialize(self.session))
            self.session = None
        final = final_event([t])
        if final is not None:
            row["stop"] = json.loads(self.serializer.serialize(final))
        if state is not None:
            text = json.dumps(state, sort_keys=True)
            if text != self.state_text:
                row["state"] = state
                self.state_text = text
        key = f"{self.prefix}{self.seq:05d}:{label(t)}"
        self.seq += 1
        await self.journal.async_step(key, tick, unchecked(row))


def final_event(ticks: list[WorkflowTick]) -> StopEvent | None:
    """The StopEvent a recorded step returned: the run's result, once it finished."""
    for t in reversed(ticks):
        if isinstance(t, TickStepResult):
            for r in t.result:
                if isinstance(r, StepWorkerResult) and isinstance(r.result, StopEvent):
                    return r.result
    return None
