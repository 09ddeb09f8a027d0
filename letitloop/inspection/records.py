"""What the queries return: a run (:class:`RunInfo`), its rows, failed tries, attempts, steps
in flight and pauses, usage totals, and all of it together (:class:`RunDetail`); a run by
what names it (:class:`RunRef`) and a wait's row (:class:`WaitRow`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

from .entries import QueueTag
from .results import decode_result
from .times import parse_utc


@dataclass(frozen=True)
class InFlight:
    """A step with a ``running`` row: in flight now, or in flight when its attempt ended.

    A step running for more than about a second gets such a row (see
    letitloop/run/inflight.py); its own final row replaces it when it finishes.
    """

    key: str
    started_at: str | None
    attempt: int
    """The attempt that was running it."""
    ran_s: float | None
    """Seconds it had run when its row was last written (at most 2 s ago if it is live)."""
    live: bool
    """True when the process running it is alive and still in this attempt."""


@dataclass(frozen=True)
class Pause:
    """A sleep, a wait for outside input or a step between two tries: in progress, or left so.

    A row whose status is ``sleeping``, ``waiting`` or ``retrying`` (see
    docs/primitives.md): a live run is in it now; a run no process holds
    resumes it where it was.
    """

    key: str
    kind: str
    """``sleep``, ``wait`` or ``step`` (a step's retry)."""
    status: str
    """``sleeping``, ``waiting`` or ``retrying``."""
    since: str | None
    """When it started (for a retry: when the failed try started)."""
    until: str | None
    """When it ends: the wake-up time, the wait's deadline (None: none), the next try."""
    attempt: int
    error: str | None = None
    """For a retry: the failed try's error."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunInfo:
    """One run as ``lil runs`` lists it. Timestamps are ISO-8601 UTC text."""

    id: str
    goal: str
    name: str | None
    status: str
    """As recorded in ``runs.status``: running, completed or failed."""
    state: str
    """What it is now (one of :data:`STATES`), from the status and the run's lock."""
    attempts: int
    steps_done: int
    steps_failed: int
    markers: int
    started_at: str
    updated_at: str
    finished_at: str | None
    error: str | None
    """The error of the last attempt that failed; for a run that is running, crashed or
    pending again, that was an earlier attempt (see :attr:`error_is_earlier`)."""
    holder_pid: int | None
    holder_host: str | None
    journal_table: str
    input_json: str | None = None
    """What the run was opened for (``runs.input``: codec JSON text), None if nothing."""
    forked_from: str | None = None
    """The run ``lil fork`` made this one from, and the step it re-executes from."""
    forked_at: str | None = None
    last_seen_at: str | None = None
    """The last sign of life: the latest of its own update, a row finished, a heartbeat."""
    in_flight: tuple[InFlight, ...] = ()
    """Steps with a ``running`` row, in journal order."""
    pauses: tuple[Pause, ...] = ()
    """Sleeps, waits and retries in progress (or left so), in journal order."""
    cancel_requested_at: str | None = None
    """When ``lil cancel`` asked the run to stop, and who asked (and why)."""
    cancel_reason: str | None = None
    input_tokens: int | None = None
    """What the run's steps reported consuming (their rows and their failed tries)."""
    output_tokens: int | None = None
    cost: float | None = None
    version: str | None = None
    """The version of the code its latest attempt ran (letitloop/identity/versions.py);
    None: unknown."""
    queue: QueueTag | None = None
    """The queue entry the run is (or will be) the run of (docs/queues.md); None: no queue's."""

    @property
    def error_is_earlier(self) -> bool:
        """Whether :attr:`error` ended an earlier attempt, not the run's state now."""
        return self.error is not None and self.status in ("running", "waiting")

    @property
    def died_in(self) -> InFlight | None:
        """For a crashed run: the step its last attempt was in when its process died."""
        if self.state != "crashed":
            return None
        return next((f for f in self.in_flight if f.attempt == self.attempts), None)

    @property
    def duration_s(self) -> float | None:
        """Seconds from the start to the finish: to now for a live run, else to the last sign
        of life. None when a timestamp is not one (a hand-edited file).
        """
        try:
            start = parse_utc(self.started_at)
            if self.finished_at:
                end = parse_utc(self.finished_at)
            elif self.state == "running":
                end = datetime.now(timezone.utc)
            else:
                end = parse_utc(self.last_seen_at or self.updated_at)
            return (end - start).total_seconds()
        except (TypeError, ValueError, OverflowError):
            return None

    def as_dict(self) -> dict[str, Any]:
        """The run as plain JSON-ready values (UTC timestamps); ``input`` decoded."""
        took = self.duration_s
        out = asdict(self)
        out["in_flight"] = [asdict(f) for f in self.in_flight]
        out["pauses"] = [p.as_dict() for p in self.pauses]
        out["input"], _ = decode_result(out.pop("input_json"))
        out["input_json"] = self.input_json
        out["error_is_earlier"] = self.error_is_earlier
        return {**out, "duration_s": None if took is None else round(took, 6)}


@dataclass(frozen=True)
class RowInfo:
    """One step or marker row of a run, in journal order (``seq`` is its rowid)."""

    seq: int
    key: str
    kind: str
    status: str
    fn: str | None
    result: str | None
    """The result as stored: JSON text written by the codec."""
    started_at: str | None
    finished_at: str | None
    duration_ms: float | None
    attempt: int
    """The attempt that wrote the row; 0 for a row a fork copied from its source."""
    error: str | None
    traceback: str | None
    wake_at: str | None = None
    """A sleep's wake-up time, a wait's deadline, a retrying step's next try."""
    input_tokens: int | None = None
    """What the step's function reported consuming (``letitloop.usage``)."""
    output_tokens: int | None = None
    cost: float | None = None
    model: str | None = None
    damaged: bool = False
    """The row fails its checksum (letitloop/integrity/checksums.py): the file was damaged there."""
    args_fp: str | None = None
    """A step's arguments' fingerprint: one digest per argument (``lil diff`` compares them)."""
    claims: int | None = None
    """A marker: how many times it was offered (each holder that entered its block)."""
    crashes: int | None = None
    """A marker: how many of its holders died inside the block."""
    holder_pid: int | None = None
    """A marker: the process holding it now, or that held it last, and its host and run."""
    holder_host: str | None = None
    holder_run: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: :class:`RowInfo`'s fields in order.
_ROW_FIELDS = tuple(f.name for f in fields(RowInfo))


def row_info(values: Sequence[Any]) -> RowInfo:
    """A :class:`RowInfo` of ``values``, one per field in order, the same object
    ``RowInfo(*values)`` makes, at a fifth of the cost: a frozen dataclass's ``__init__``
    sets each of its 24 fields through ``object.__setattr__``, and a reader makes one per
    row (10,000 for a long run's page)."""
    row = object.__new__(RowInfo)
    row.__dict__.update(zip(_ROW_FIELDS, values, strict=True))
    return row


@dataclass(frozen=True)
class TryInfo:
    """One call of a step that did not give it its result (a row of ``step_tries``): a
    failed try of a retry policy, a call that raised without one (recorded when it
    raised, since migration 0019), or a call its process did not survive (``crashed``)."""

    key: str
    number: int
    """1, 2, … over the step's life in the run."""
    attempt: int
    started_at: str
    failed_at: str
    error: str
    next_at: str | None
    """When the next try was due; None: none (the step gave up and raised)."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    model: str | None = None
    ended: str = "failed"
    """``failed`` (the function raised) or ``crashed`` (the process died during it)."""
    traceback: str | None = None
    """The failed call's traceback (None: a crash, or a try from before migration 0019)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ReservationInfo:
    """A paid call's reservation (a row of ``reservations``): what it reserved before it
    started, and whether its usage settled it."""

    key: str
    call: int
    """1, 2, … in the run, in the order reserved."""
    attempt: int
    reserved_at: str
    tokens: int | None
    cost: float | None
    model: str | None
    settled_at: str | None
    """None: not settled: in flight, or cut short by its process's death (counted as spent)."""
    settled_tokens: int | None = None
    settled_cost: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class UsageTotals:
    """Tokens and cost summed over rows; ``None`` where nothing was reported."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    steps: int = 0
    """How many steps reported usage (a step counted once, whatever its tries)."""

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens": self.tokens}


@dataclass(frozen=True)
class AttemptInfo:
    """One process's pass over a run, and how it ended as far as the file tells.

    An attempt that closed the run recorded how (its outcome and error, since
    migration 0019); one that did not (a kill), and any before 0019, is read from
    what it left (its ``running`` and ``failed`` rows, the run's own status for
    the last attempt) and from the ``exit`` event ``lil watch`` recorded for its
    process.
    """

    attempt: int
    pid: int
    host: str
    watch_id: str | None
    """The ``lil watch`` session that started the process, if any."""
    started_at: str
    watch_attempt: int | None = None
    """That session's count of starts: ``lil watch``'s attempt 3 (LETITLOOP_ATTEMPT)."""
    outcome: str | None = None
    """``running``, ``completed``, ``failed`` (an exception left the run), ``died`` (its
    process is gone with the run unfinished), ``interrupted`` (it left a step unfinished),
    ``cancelled``, ``waiting`` (it stopped to wait for outside input), ``resumed`` (an
    earlier attempt that left no record of how it ended, only that a later one took the run
    over: a SIGKILL writes nothing), or None when the file does not say."""
    error: str | None = None
    """The error that failed it, when known."""
    step: str | None = None
    """The step it is in (running), was in when it ended, or that failed."""
    step_s: float | None = None
    """Seconds it had been in that step, at least (None: a failed step, or unknown)."""
    exit_code: int | None = None
    """Its process's exit status as ``lil watch`` saw it (128+N for signal N)."""
    signal: str | None = None
    version: str | None = None
    """The version of the code it ran (letitloop/identity/versions.py); None: unknown."""
    ended_at: str | None = None
    """When it closed the run, as it recorded (migration 0019); None: it did not (a kill)."""
    recorded: bool = False
    """Whether ``outcome`` and ``error`` are what the attempt recorded when it closed the run
    (migration 0019), not what its rows tell."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunDetail:
    """One run with its rows, attempts and the supervisor's events around it."""

    run: RunInfo
    rows: list[RowInfo]
    attempts: list[AttemptInfo]
    supervisor_events: list[dict[str, Any]]
    """Rows of ``supervisor_events`` of every watcher that started an attempt of the run."""
    previous_steps: int | None
    """Steps done by the goal's previous completed run, None when there is none."""
    result_json: str | None = None
    """The run's result as stored (``runs.result``: what ``@durable`` returned)."""
    tries: list[TryInfo] = field(default_factory=list)
    """Calls of its steps that did not give them their result (failed tries, calls that
    raised or were cut short by a crash, kept for their usage), in the order they ended."""
    usage: UsageTotals = field(default_factory=UsageTotals)
    """What its steps' calls reported consuming: every paid call once."""
    replayed: UsageTotals = field(default_factory=UsageTotals)
    """What its attempts got back by replay instead of spending it again: the usage of
    each step an attempt really replayed (``step_replays``), once per replay."""
    reservations: list[ReservationInfo] = field(default_factory=list)
    """What its paid calls reserved before they started (a run with a budget), in order."""

    def as_dict(self) -> dict[str, Any]:
        """The recorded columns as they are (results as stored text; see :func:`export_run`)."""
        return {
            "run": self.run.as_dict(),
            "rows": [r.as_dict() for r in self.rows],
            "attempts": [a.as_dict() for a in self.attempts],
            "supervisor_events": self.supervisor_events,
            "previous_steps": self.previous_steps,
            "tries": [t.as_dict() for t in self.tries],
            "reservations": [r.as_dict() for r in self.reservations],
            "usage": {**self.usage.as_dict(), "replayed": self.replayed.as_dict()},
        }


@dataclass(frozen=True)
class RunRef:
    """A run by what names it, and its recorded status: no counts, no lock looked at (for
    shell completion, which must be quick)."""

    id: str
    goal: str
    name: str | None
    status: str


@dataclass(frozen=True)
class WaitRow:
    """A wait's row of a run (``wait_for``), as ``send`` reads it before it answers one."""

    key: str
    status: str
    """``waiting`` until it gets a value or times out, then ``done`` or ``failed``."""
    error: str | None
    """For a wait that timed out: why."""
    started_at: str | None
    finished_at: str | None
    deadline: str | None
    """The wait's timeout (``wake_at``), None: none."""
