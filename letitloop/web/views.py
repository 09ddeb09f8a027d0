"""What the web pages show, as plain values: a run's steps with how each ended, its attempts
as a timeline, its values pretty-printed and cut to a size a browser shows at once.

No HTML here (that is the templates', which escape everything) and no journal access (the
pages read :mod:`letitloop.inspection`, as ``lil`` does): a :class:`~letitloop.inspection.
RunDetail` in, dicts and lists out. The words come from :mod:`letitloop.runtext.words`, so
the browser and the terminal say the same thing.

Here: a run's steps, page by page, and its summary and table cells; a stored
value as shown is ``values.py``'s, the attempts' timeline ``timeline.py``'s.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..inspection import RowInfo, RunDetail, RunInfo
from ..runtext import render
from ..runtext.detail import budget_text, reservation_lines
from ..runtext.runs import queue_text
from ..runtext.words import in_flight, pause_text, quoted, usage_text
from ..streams.chunks import Chunk, Resume
from .timeline import label_of
from .values import Value, clipped, pretty

#: The most steps one run page lists; more are paged (``?page=``).
STEPS_PER_PAGE = 200

#: How many pages either side of the shown one the page links list (with the first and last).
PAGE_LINKS_AROUND = 3

#: The most runs one runs page lists; more are paged (``?offset=``).
RUNS_PER_PAGE = 50

#: The most characters of a stream's answer a run page shows: its tail, as it grows (a
#: page made by ``lil export`` shows it whole).
STREAM_TAIL = 4_000

#: What a stream's recoveries after a kill are called on its page.
RECOVERED = {"reattach": "re-attached", "continue": "continued", "restart": "restarted"}


@dataclass
class Step:
    """A row of a run as its page lists it."""

    n: int
    row: RowInfo
    label: str
    """One of :data:`timeline.LABELS`: how the row stands (see :func:`label_of`)."""
    replayed: int
    """How many times later attempts got its result back from the journal."""
    took: str
    tokens: str
    cost: str
    result: Value | None
    error: Value | None
    traceback: Value | None
    holder: str | None = None
    """A marker's holder and counts (see :func:`holder_text`); None for a step."""


def holder_text(r: RowInfo) -> str | None:
    """A marker's holder: ``held by pid 12 on host (run 01J…) · offered 2 times · 1 holder
    died in it`` (the one holding it now if it is pending, else the last one); None for a
    step."""
    if r.kind != "marker":
        return None
    held = "held by" if r.status == "pending" else "last held by"
    parts = []
    if r.holder_pid is not None or r.holder_host:
        run = f" (run {r.holder_run})" if r.holder_run else ""
        parts.append(f"{held} pid {r.holder_pid} on {r.holder_host}{run}")
    if r.claims is not None:
        parts.append(f"offered {r.claims} time{'' if r.claims == 1 else 's'}")
    if r.crashes:
        parts.append(f"{r.crashes} holder{'' if r.crashes == 1 else 's'} died in it")
    return " · ".join(parts) or None


def replay_counts(detail: RunDetail, replays: list[Any]) -> Counter[str]:
    """How many times each key was got back by replay (``step_replays``' records)."""
    counts: Counter[str] = Counter()
    for keys in replays:
        if isinstance(keys, list):  # a damaged record counts nothing
            counts.update(k for k in keys if isinstance(k, str))
    return counts


def steps(detail: RunDetail, replays: Counter[str], first: int, count: int) -> list[Step]:
    """The rows ``first`` to ``first + count`` (0-based) as the page lists them."""
    run = detail.run
    out = []
    for i, r in enumerate(detail.rows[first : first + count], first + 1):
        took = r.duration_ms / 1000 if isinstance(r.duration_ms, (int, float)) else None
        tokens = None
        if r.input_tokens is not None or r.output_tokens is not None:
            tokens = (r.input_tokens or 0) + (r.output_tokens or 0)
        out.append(
            Step(
                n=i,
                row=r,
                label=label_of(r, run),
                replayed=replays.get(r.key, 0) if r.kind == "step" else 0,
                took=render.duration(took),
                tokens="-" if tokens is None else f"{tokens:,}",
                cost=render.money(r.cost),
                result=pretty(r.result) if r.status != "failed" else None,
                error=clipped(r.error) if r.error else None,
                traceback=clipped(r.traceback) if r.traceback else None,
                holder=holder_text(r),
            )
        )
    return out


def page_links(page: int, pages: int) -> list[int | None]:
    """The page numbers a run's page links to: the first, the last and
    :data:`PAGE_LINKS_AROUND` either side of ``page``; None where pages are left out. As
    many links for a run of 100,000 steps as for one of 10,000."""
    near = range(max(1, page - PAGE_LINKS_AROUND), min(pages, page + PAGE_LINKS_AROUND) + 1)
    wanted = sorted({1, pages, *near})
    out: list[int | None] = []
    for p in wanted:
        if out and p - (out[-1] or 0) > 1:
            out.append(None)
        out.append(p)
    return out


def state_text(run: RunInfo) -> str:
    """The run's state and what it is doing, as ``lil show`` says it."""
    if run.state == "running":
        now = [in_flight(f) for f in run.in_flight if f.live]
        return f"running — held by pid {run.holder_pid} on {run.holder_host}" + (
            f", {now[0]}" if now else ""
        )
    if run.state == "crashed":
        died = run.died_in
        where = f" {in_flight(died)}" if died else ""
        return f"crashed — its last process (pid {run.holder_pid} on {run.holder_host}) died{where}"
    if run.state == "pending":
        return "pending — a fork no process has opened yet"
    if run.state == "waiting":
        return "waiting — it stopped to wait for outside input; no process holds it"
    return run.state


def pauses(run: RunInfo) -> list[str]:
    return [pause_text(p, run) for p in run.pauses]


def send_commands(run: RunInfo) -> list[str]:
    """For a run waiting for outside input: the ``lil send`` command that answers each wait."""
    if run.state not in ("waiting", "running", "crashed"):
        return []
    return [
        quoted("lil", "send", run.id, p.key.split("#")[0], "VALUE")
        for p in run.pauses
        if p.status == "waiting"
    ]


def run_summary(detail: RunDetail) -> dict[str, Any]:
    """The run's head: state, times, progress, usage and saved by replay, input and result."""
    run = detail.run
    return {
        "state": state_text(run),
        "pauses": pauses(run),
        "send": send_commands(run),
        "started": render.local_time(run.started_at),
        "finished": render.local_time(run.finished_at) if run.finished_at else None,
        "took": render.duration(run.duration_s),
        "progress": (
            f"{run.steps_done:,} of {detail.previous_steps:,} steps (the previous completed "
            f"run with the same input)"
            if detail.previous_steps
            else f"{render.counted(run.steps_done, 'step')} done"
        ),
        "usage": usage_text(detail.usage) if detail.usage.steps else None,
        "saved": usage_text(detail.replayed) if detail.replayed.steps else None,
        "budget": budget_text(detail) or None,
        "reserved": [line.strip() for line in reservation_lines(detail)],
        "input": pretty(run.input_json),
        "result": pretty(detail.result_json) if run.status == "completed" else None,
        "error": clipped(run.error) if run.error else None,
        "error_is_earlier": run.error_is_earlier,
    }


def run_cells(run: RunInfo) -> dict[str, str]:
    """A run as a line of the runs page."""
    tokens = None
    if run.input_tokens is not None or run.output_tokens is not None:
        tokens = (run.input_tokens or 0) + (run.output_tokens or 0)
    doing = ""
    died = run.died_in
    if run.queue is not None and run.attempts == 0:
        doing = queue_text(run)  # a queue's entry no worker started yet
    elif died is not None:
        doing = f"attempt {run.attempts} died {in_flight(died)}"
    elif run.state == "running":
        doing = next((in_flight(f) for f in run.in_flight if f.live), "")
    elif run.pauses:
        doing = pause_text(run.pauses[0], run)
    return {
        "steps": f"{run.steps_done:,}"
        + (f" ({run.steps_failed:,} failed)" if run.steps_failed else ""),
        "tokens": "-" if tokens is None else f"{tokens:,}",
        "cost": render.money(run.cost),
        "started": render.local_time(run.started_at),
        "doing": doing,
        "queue": "" if run.queue is None else f"{run.queue.queue} (priority {run.queue.priority})",
        "took": "-"
        if run.queue is not None and run.attempts == 0
        else render.duration(run.duration_s),
    }


def event_cells(e: dict[str, Any]) -> list[str]:
    """A ``lil watch`` event as the supervisor's table shows it."""
    how = []
    if e.get("exit_code") is not None:
        how.append(f"exit {e['exit_code']}")
    if e.get("signal"):
        how.append(str(e["signal"]))
    return [
        render.local_time(e.get("at")),
        str(e.get("event")),
        str(e.get("attempt")),
        " ".join(how),
        render.one_line(str(e.get("message") or "")),
    ]


@dataclass
class StreamView:
    """A streamed step of a run (``letitloop.streams``) as its page shows it."""

    key: str
    text: str
    """The answer so far (what came after the last ``reset``), or its tail."""
    cut: int
    """How many characters before ``text`` are not shown (0: it is whole)."""
    last: int
    """The offset of its last chunk journaled (-1: none)."""
    state: str
    tool_calls: list[str]
    """Its tool calls whose JSON is whole: ``name(arguments)``."""


def stream_view(key: str, chunks: list[Chunk], whole: bool = False) -> StreamView:
    """Stream ``key`` of a run from its chunks (all of them, in order)."""
    resume = Resume.of(chunks)
    text = resume.text
    cut = 0 if whole else max(0, len(text) - STREAM_TAIL)
    said = [f"{len(chunks):,} chunk{'' if len(chunks) == 1 else 's'}"]
    said.append("ended" if resume.ended else "not ended")
    said += [f"{RECOVERED.get(how, how)} after a kill" for how in resume.recoveries]
    calls = [f"{c['name']}({c['arguments']})" for c in resume.tool_calls.values()]
    last = chunks[-1].seq if chunks else -1
    return StreamView(key, text[cut:], cut, last, ", ".join(said), calls)


def stamp(run: RunInfo, streams: list[int] | None = None) -> str:
    """What changes whenever the run's page would: its recorded state and signs of life,
    then the offset of each stream's last chunk (``_41_7``; ``streams``, in key order)."""
    # repr escapes what UTF-8 cannot hold (a lone surrogate in an error), so it encodes.
    head = hashlib.sha1(repr(run).encode()).hexdigest()[:16]
    return head + "".join(f"_{n}" for n in streams or ())
