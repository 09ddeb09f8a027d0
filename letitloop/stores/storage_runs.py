"""``RunRows`` and ``RunEnds``: a run found or started, claimed, and ended; and their records.

``RunRows`` is the opener's (``opening.py``: a name's generations, the run an
opener gets, its claim, the goal's key check) and the attempt's
span (``otel.py``); ``RunEnds`` what ``closing.py`` and ``cancellation.py``
read and write when the attempt ends. ``RecordedRuns`` is a replay-only
opener's read, which only a journal file offers (``schemes.open_readonly_storage``).
Implemented by ``sqlite_runs.SqliteRunRows``, ``memory_runs.MemoryRunRows`` and
``postgres_runs.PostgresRunRows``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple, Protocol

#: What an opener does with the run it found (see ``opening.decide``): look
#: again, refuse it as cancelled, resume it as a new attempt, or replay it whole.
RunDecision = Literal["again", "cancel", "resume", "replay"]

#: What an opener reads of a run before it claims it (a NamedTuple by the functional
#: form: see storage_steps.py, issue 30).
RunState = NamedTuple(  # noqa: UP014 (see above)
    "RunState",
    [
        ("status", str),
        ("attempts", int),
        ("result", str | None),
        ("name", str | None),
        ("cancel_requested_at", str | None),
        ("cancel_reason", str | None),
    ],
)


class RunRows(Protocol):
    """A goal's runs as an opener sees them: found or started, claimed; the attempt's span."""

    def find_or_start_run(
        self,
        goal: str,
        name: str | None,
        input_fp: str | None,
        input_text: str | None,
        now: float,
        hold: Callable[[str], None],
        *,
        version: str | None = None,
    ) -> tuple[str, bool]:
        """``(run id, started)``: the run an opener of ``goal`` gets, or a new one.

        A new run's first attempt records ``version``, the version of the code
        it runs (versions.py; None: unknown). A named opener gets the run of that
        name; an unnamed one the goal's newest unnamed run opened for ``input_fp``
        that is running, failed or waiting and not asked to cancel. Else a new run
        is started with its first attempt, ``hold(run_id)`` called before its row
        is written (if it raises, nothing is left behind). Comes first: it makes
        the goal's room for steps.
        """
        ...

    def claim_run(
        self,
        run_id: str,
        now: float,
        decide: Callable[[RunState | None], RunDecision],
        *,
        version: str | None = None,
    ) -> tuple[RunDecision, RunState | None]:
        """Read the run, ask ``decide``, and do what it says, in one transaction.

        ``"cancel"`` marks the run cancelled; ``"resume"`` records a new attempt
        held by this process, running code of ``version``; ``"again"`` and
        ``"replay"`` write nothing.
        """
        ...

    def generation_rows(self, goal: str, name: str, prefix: str) -> list[tuple[str, str, Any]]:
        """``(name, status, finished_at)`` of goal's runs named name or prefix… (generations.py)."""
        ...

    def key_check(self, goal: str, check: str | None, now: float) -> str | None:
        """The check value of the key ``goal``'s values are encrypted with (encryption.py);
        ``check`` is recorded first when none is (the first opener's wins) and the store
        is writable; None when none is recorded."""
        ...

    def trace_attempt(self, run_id: str, attempt: int, trace: str) -> str | None:
        """Record ``trace`` (a W3C ``traceparent``) as the attempt's span, and return the one
        the latest earlier attempt of the run recorded (None: none did), in one transaction."""
        ...


class RunEnds(Protocol):
    """A run's end as its holder learns it, and the cancel request it may meet first."""

    def cancel_request(self, run_id: str) -> tuple[str | None, str | None] | None:
        """``(requested_at, reason)`` of the run's cancel request (``requested_at``
        None: none was made); None when there is no such run."""
        ...

    def complete_run(self, run_id: str, now: float, result: str | None) -> None:
        """Mark the run completed with its result text."""
        ...

    def fail_run(self, run_id: str, now: float, error: str) -> None:
        """Mark the run failed with its error text (the next opener resumes it)."""
        ...

    def cancel_run(self, run_id: str, now: float, error: str) -> None:
        """Mark the run cancelled, as its holder learnt."""
        ...

    def leave_waiting(self, run_id: str, now: float) -> None:
        """Mark the run waiting for a value from outside."""
        ...


class RecordedRuns(Protocol):
    """A replay-only opener's run, read without writing anything (a journal file only)."""

    def recorded_run(
        self, goal: str, name: str | None, input_fp: str | None
    ) -> tuple[str, RunState] | None:
        """The run a replay-only opener replays; None: no such run. The named run, else the
        goal's newest unnamed run opened for the same input, whatever its status."""
        ...
