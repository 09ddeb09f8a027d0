"""How each row of a run stands on a web page (:func:`label_of`, one of :data:`LABELS`)
and the run's attempts as a timeline (:func:`attempts`: per attempt, the steps it got back
by replay, then its calls and how each went). Plain values; the words come from
:mod:`letitloop.runtext.words`, as ``lil show`` says them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..inspection import RowInfo, RunDetail, RunInfo, TryInfo
from ..runtext import render
from ..runtext.words import ending, watch_label

#: The timeline of an attempt draws one mark per step up to this many, then counts only.
TIMELINE_MARKS = 300

#: How each label of the timeline and the steps' table is drawn (the CSS class is the label).
LABELS = (
    "ran",
    "replayed",
    "copied",
    "failed",
    "retried",
    "in flight",
    "killed",
    "sleeping",
    "waiting",
    "retrying",
    "cancelled",
    "damaged",
)


@dataclass
class Mark:
    """One step on an attempt's timeline: its key and how it went in that attempt."""

    key: str
    label: str
    note: str = ""


#: An attempt's badge by how it ended: the ones its process did not survive stand out.
OUTCOME_BADGES = {
    "died": ("crashed", "killed"),
    "resumed": ("crashed, then resumed", "killed"),
    "interrupted": ("interrupted", "killed"),
    "failed": ("failed", "failed"),
    "completed": ("completed", "completed"),
    "running": ("running", "running"),
    "cancelled": ("cancelled", "cancelled"),
    "waiting": ("waiting", "waiting"),
}


@dataclass
class Attempt:
    number: int
    head: str
    ending: str
    outcome: str | None
    marks: list[Mark] = field(default_factory=list)
    counts: list[tuple[str, int]] = field(default_factory=list)

    @property
    def badge(self) -> tuple[str, str] | None:
        """The outcome's word and its badge's class."""
        return OUTCOME_BADGES.get(self.outcome or "")


def label_of(r: RowInfo, run: RunInfo) -> str:
    """How a row stands: ran, failed, in flight (a live process is in it), killed (its
    attempt's process died in it), sleeping, waiting, retrying, cancelled; copied for a row
    a fork copied from its source; damaged for a row that fails its checksum."""
    if r.damaged:
        return "damaged"
    if r.status == "running":
        live = any(f.key == r.key and f.live for f in run.in_flight)
        return "in flight" if live else "killed"
    if r.status in ("sleeping", "waiting", "retrying"):
        return "cancelled" if run.state == "cancelled" else r.status
    if r.status == "failed":
        return "failed"
    if r.attempt == 0:
        return "copied"
    return "ran"


def _try_label(t: TryInfo) -> str:
    if t.ended == "crashed":
        return "killed"
    return "retried" if t.next_at else "failed"


def attempts(
    detail: RunDetail, replays: Counter[str], replayed_by: Sequence[tuple[int, Any]] = ()
) -> list[Attempt]:
    """The run's attempts, each with its timeline: the steps it got back by replay
    (``replayed_by``: ``Inspector.attempt_replays``), then the calls it made, in journal
    order, and how each went (its failed tries first, then its rows)."""
    run = detail.run
    # Each attempt's first TIMELINE_MARKS marks, and how many of each label it has in all:
    # a mark is made only for what is drawn (a run of 100,000 steps draws 300 an attempt).
    by_attempt: dict[int, list[Mark]] = {}
    counted: dict[int, Counter[str]] = {}

    def add(attempt: int, key: str, label: str, note: str = "") -> None:
        marks = by_attempt.setdefault(attempt, [])
        counted.setdefault(attempt, Counter())[label] += 1
        if len(marks) < TIMELINE_MARKS:
            marks.append(Mark(key, label, note))

    for attempt, keys in replayed_by:
        if isinstance(keys, list):  # a damaged record counts nothing
            for k in keys:
                if isinstance(k, str):
                    add(attempt, k, "replayed")
    for t in detail.tries:
        add(t.attempt, t.key, _try_label(t), f"try {t.number}: {render.one_line(t.error)}")
    for r in detail.rows:
        add(r.attempt, r.key, label_of(r, run))
    out = []
    for a in detail.attempts:
        watch = watch_label(a)
        head = f"attempt {a.attempt} · pid {a.pid} on {a.host}" + (f" · {watch}" if watch else "")
        if a.version is not None:
            head += f" · version {a.version}"
        counts = counted.get(a.attempt, Counter())
        out.append(
            Attempt(
                a.attempt,
                head,
                ending(a),
                a.outcome,
                by_attempt.get(a.attempt, []),
                [(label, counts[label]) for label in LABELS if counts[label]],
            )
        )
    if 0 in by_attempt:  # a fork's copied rows: no attempt of this run wrote them
        marks = by_attempt[0]
        out.insert(
            0,
            Attempt(0, "copied from the run this one was forked from", "", None, marks, []),
        )
    return out
