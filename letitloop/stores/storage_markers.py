"""``MarkerRows``: a marker's record, read, claimed and finished (``markers.py``), and its records.

Implemented by ``sqlite_markers.SqliteMarkerRows``, ``memory_markers.MemoryMarkerRows``
and ``postgres_markers.PostgresMarkerRows``; the marker's hold, across processes,
is ``Holding.marker_hold`` (``storage_holding.py``): ``MarkerStore`` is both,
what ``markers.py`` and ``markerhold.py`` ask of a store.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from .storage_holding import Holding

# NamedTuples by the functional form: see storage_steps.py (issue 30).

#: Where a marker's record lives: its scope, its run, its name, and the goal that takes it.
#:
#: ``run`` is the run id (scope ``"run"``), ``"*"`` (``"goal"``: shared by
#: every run of the goal) or ``""`` (``"global"``: one per journal).
MarkerAt = NamedTuple(  # noqa: UP014 (see above)
    "MarkerAt", [("scope", str), ("run", str), ("name", str), ("goal", str)]
)

#: A marker's record; ``kind`` is ``"marker"`` unless a step holds the name.
MarkerRecord = NamedTuple(  # noqa: UP014 (see above)
    "MarkerRecord",
    [
        ("kind", str),
        ("status", str),
        ("claims", int | None),
        ("crashes", int | None),
        ("holder_pid", int | None),
        ("holder_host", str | None),
        ("holder_run", str | None),
        ("started_at", str | None),
        ("holder_token", str | None),
    ],
)


#: What ``claim_marker`` found or did: offered, with the counts after the claim.
MarkerClaim = NamedTuple(  # noqa: UP014 (see above)
    "MarkerClaim",
    [
        # ``"marker"``, or the kind of the row that holds the name (nothing was written).
        ("kind", str),
        ("offered", bool),
        ("claims", int),
        ("crashes", int),
    ],
)


class MarkerRows(Protocol):
    """A marker's record: read, claimed and finished, each in one transaction."""

    def marker(self, at: MarkerAt) -> MarkerRecord | None:
        """The marker's record, None when it has none."""
        ...

    def claim_marker(
        self, at: MarkerAt, holder: tuple[int, str, str, str], now: float, attempt: int
    ) -> MarkerClaim:
        """In one transaction: nothing if the marker is done (or the name is a step's),
        else write ``holder`` (pid, host, run, token) as its claim, ``pending``; a
        ``pending`` record found counts as a crash of its holder."""
        ...

    def finish_marker(
        self,
        at: MarkerAt,
        token: str,
        now: float,
        duration_ms: float,
        failure: tuple[str, str, int] | None,
    ) -> tuple[bool, MarkerRecord | None]:
        """Mark the marker done (``failure`` None) or failed with ``(error, traceback,
        interrupted)``, only where it is still ``pending`` under ``token``.

        ``(lost, record)``: ``lost`` when the claim was no longer this holder's,
        then the record as it is now.
        """
        ...


class MarkerStore(MarkerRows, Holding, Protocol):
    """A marker's record and its hold across processes: what ``markers.py`` asks of a store."""
