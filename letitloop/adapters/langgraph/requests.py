"""Which request an invocation of a thread is: the thread's request log and the rule that reads it.

A request is one top-level ``invoke`` / ``stream`` (sync or async) of a graph
on a thread with an input (a ``Command(resume=...)`` is an input too). Its
identity is (thread, input, the thread's state it continues from). In
LangGraph a new ``invoke(input)`` on a finished thread is a new turn that
appends the input; here it is a new turn only when it really is one:

- **the same request again** (a retried request, a second copy, a program
  rerun after it was killed once the graph had returned): the thread's newest
  request had the same input and the thread has not moved since it finished.
  It is answered from the checkpoint it finished with, without running the
  graph, within ``reuse`` seconds of its end;
- **a program rerun after a kill, turn by turn**: a process's first request
  on a thread, when the thread's newest requests were made by a process that
  is gone, is taken as that process's first request again if it has the same
  input; each later request of this process continues from where the
  previous one left it (``Cursor``), so turn 2 of the rerun is turn 2 of the
  killed program (finished: answered; unfinished: resumed);
- **a second copy**: a request that arrived while the thread's newest
  request was running continues from where that one started (``arrival``),
  so it is that request even if the first copy's program went on to its
  next request before this one got the thread;
- **the same request, unfinished**: resumed, not appended again: LangGraph is
  asked ``invoke(None)`` when the request's input checkpoint was saved, else
  the input is given again;
- anything else is a new request, from the thread's newest checkpoint, as in
  LangGraph: another input, the same input after other turns, a request whose
  answer is older than ``reuse``, or ``fresh`` (the invocation's
  ``config["configurable"]["letitloop_fresh"]``).

The log is the table ``langgraph_requests`` of the saver's file (migration
0002 of the adapter's set). Only ``invocations.py`` writes it, holding the
thread; the functions here read and write rows, and decide.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ...primitives.clock import utc_iso
from ...stores.sqlite.store import Store
from ..agentcalls import DEFAULT_REUSE
from . import polled

#: Seconds a finished request is answered again when asked again (the same
#: input on the state it left, or a rerun program's earlier turns). An hour
#: covers a supervisor's restart after a kill and a retried request; the same
#: question asked tomorrow gets a fresh answer. ``LetItLoopCheckpointSaver(reuse=...)``; the
#: same window as every other adapter's (agentcalls.DEFAULT_REUSE).
REUSE_SECONDS = DEFAULT_REUSE

#: How many of a thread's newest requests the rule reads: a rerun program's
#: turns are among the thread's latest, and a long conversation's first
#: turns are older than the reuse window anyway.
_RECENT = 200


@dataclass(frozen=True)
class Request:
    """One row of ``langgraph_requests``."""

    thread: str
    seq: int
    input_fp: str
    kind: str
    start: str | None
    end: str | None
    status: str
    process: str
    started: str
    finished: str | None

    @property
    def done(self) -> bool:
        return self.status == "done"

    def age(self, now: float) -> float:
        """Seconds since it finished (0 when it has not)."""
        if self.finished is None:
            return 0.0
        when = datetime.datetime.fromisoformat(self.finished.replace("Z", "+00:00"))
        return now - when.timestamp()


_COLUMNS = (
    "thread_id, seq, input_fp, input_kind, from_checkpoint, to_checkpoint, status, "
    "process, started, finished"
)


def recent(store: Store, thread: str) -> list[Request]:
    """The thread's newest requests, oldest first."""
    rows = polled.query(
        store,
        f"SELECT {_COLUMNS} FROM langgraph_requests WHERE thread_id = ? ORDER BY seq DESC LIMIT ?",
        (thread, _RECENT),
    )
    return [Request(*row) for row in reversed(rows)]


def newest_checkpoint(store: Store, thread: str) -> str | None:
    """The id of the thread's newest root checkpoint (the state a new turn continues), or None."""
    rows = polled.query(
        store,
        "SELECT checkpoint_id FROM langgraph_checkpoints WHERE thread_id = ? AND "
        "checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1",
        (thread,),
    )
    return str(rows[0][0]) if rows else None


def has_checkpoint(store: Store, thread: str, checkpoint_id: str) -> bool:
    return bool(
        polled.query(
            store,
            "SELECT 1 FROM langgraph_checkpoints WHERE thread_id = ? AND checkpoint_ns = '' "
            "AND checkpoint_id = ?",
            (thread, checkpoint_id),
        )
    )


def arrival(store: Store, thread: str) -> str | None:
    """Where a request that arrives now continues from, before it waits for the thread.

    The start of the thread's newest request if that one is running (this is
    a second copy of it, or a request that will run after it), else the
    thread's newest checkpoint.
    """
    rows = polled.query(
        store,
        "SELECT status, from_checkpoint FROM langgraph_requests WHERE thread_id = ? "
        "ORDER BY seq DESC LIMIT 1",
        (thread,),
    )
    if rows and rows[0][0] == "running":
        return None if rows[0][1] is None else str(rows[0][1])
    return newest_checkpoint(store, thread)


def start(
    store: Store,
    thread: str,
    input_fp: str,
    kind: str,
    head: str | None,
    process: str,
    now: float,
    typed_input: tuple[str, bytes] | None = None,
) -> Request:
    """Record a new request of ``thread``, running from ``head``; one committed row.

    ``typed_input``: the input as the saver's serde encodes it (None: not kept),
    for ``resume`` when nothing of the request reached a checkpoint.
    """
    with polled.transaction(store) as c:
        (last,) = c.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM langgraph_requests WHERE thread_id = ?", (thread,)
        ).fetchone()
        row = Request(
            thread,
            int(last) + 1,
            input_fp,
            kind,
            head,
            None,
            "running",
            process,
            utc_iso(now),
            None,
        )
        c.execute(
            f"INSERT INTO langgraph_requests ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.thread,
                row.seq,
                row.input_fp,
                row.kind,
                row.start,
                None,
                row.status,
                row.process,
                row.started,
                None,
            ),
        )
        if typed_input is not None:
            c.execute(
                "INSERT OR REPLACE INTO langgraph_request_inputs (thread_id, seq, input_type, "
                "input) VALUES (?, ?, ?, ?)",
                (row.thread, row.seq, typed_input[0], typed_input[1]),
            )
    return row


def typed(serde: Any, value: Any) -> tuple[str, bytes] | None:
    """``value`` as ``serde`` encodes it, kept for ``resume`` (None when it cannot: LangGraph
    refuses such an input itself when it writes it)."""
    try:
        return cast(tuple[str, bytes], serde.dumps_typed(value))
    except Exception:
        return None


def recorded_input(store: Store, request: Request) -> tuple[str, bytes] | None:
    """The input ``request`` was made with, as the saver's serde encoded it (None: not kept)."""
    rows = polled.query(
        store,
        "SELECT input_type, input FROM langgraph_request_inputs WHERE thread_id = ? AND seq = ?",
        (request.thread, request.seq),
    )
    if not rows or rows[0][0] is None:
        return None
    return str(rows[0][0]), bytes(rows[0][1])


def finish(store: Store, request: Request, status: str, end: str | None, now: float) -> None:
    """Mark ``request`` done (with the checkpoint it left) or failed; one committed row."""
    with polled.transaction(store) as c:
        c.execute(
            "UPDATE langgraph_requests SET status = ?, to_checkpoint = ?, finished = ? "
            "WHERE thread_id = ? AND seq = ?",
            (status, end, utc_iso(now), request.thread, request.seq),
        )


@dataclass(frozen=True)
class Match:
    """What an invocation is: a recorded request (answered or resumed), or None: a new one."""

    request: Request | None
    #: The recorded request finished: answer it from ``request.end``.
    answer: bool = False


def choose(
    log: Sequence[Request],
    input_fp: str,
    head: str | None,
    cursor: str | None,
    arrived: str | None,
    me: str,
    alive: Callable[[str], bool],
    now: float,
    reuse: float,
) -> Match:
    """Which recorded request of the thread (``log``, oldest first) this invocation is.

    ``cursor``: the checkpoint this process left the thread at after its last
    request on it (None: this process has made none). ``arrived``: where
    this request continued from when it arrived, before it waited for the
    thread (``arrival``): a copy that arrived while the first ran is that
    request, even if the first copy's program went on to its next request
    before this one got the thread. ``alive(process)``:
    whether the process that made a request still runs. See the module
    docstring for the rule.
    """
    if not log:
        return Match(None)
    newest = log[-1]

    def taken(r: Request) -> Match | None:
        if r.input_fp != input_fp:
            return None
        if r.done:
            if r.age(now) > reuse or r.end is None:
                return None
            return Match(r, answer=True)
        # Unfinished: only the thread's newest one can be resumed (a later
        # request on the thread abandoned it, as LangGraph does).
        return Match(r) if r is newest else None

    # This process knows where it left the thread (else: where the thread was
    # when this request arrived): the request continues from there (turn 2 of
    # a rerun program is turn 2, and its answer to turn 1's question is that
    # answer, not a later one).
    point = cursor if cursor is not None else arrived
    for r in reversed(log):
        if r.start == point:
            found = taken(r)
            if found is not None:
                return found
    if newest.done and newest.end == head:
        # Nothing happened on the thread since its newest request finished:
        # the same input again is that request again (a retry, a second
        # copy, a rerun after a kill once the graph had returned).
        found = taken(newest)
        if found is not None:
            return found
    if cursor is not None:
        return Match(None)
    if newest.process != me and not alive(newest.process):
        # This process's first request on a thread whose last requests were
        # made by a process that is gone: a program rerun starts again at
        # that process's first request.
        first = len(log) - 1
        while first > 0 and log[first - 1].process == newest.process:
            first -= 1
        found = taken(log[first])
        before = log[first - 1] if first > 0 else None
        if found is None and before is not None and before.done and before.end == log[first].start:
            # That process began where the request before left the thread: its first
            # request may have been that one, answered from the log (which records
            # no row for an answer), as a program rerun after an interrupt() does.
            found = taken(before)
        if found is not None:
            return found
    found = taken(newest) if not newest.done else None
    return found if found is not None else Match(None)
