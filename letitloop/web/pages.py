"""The pages of ``lil ui`` as HTML text: the runs, one run (whole, or the part a live page
swaps in), one row, and the run as one self-contained file (``lil export --format html``).

Each function takes an :class:`~letitloop.inspection.Inspector` and reads it through the
same library calls as ``lil`` (:mod:`letitloop.inspection`), so the two never disagree.
Every value reaches the HTML through Jinja2 with autoescape on, after
:func:`letitloop.web.values.shown` (the environment's ``finalize``) has made its control
characters and lone surrogates visible escapes: a ``<script>`` in a result is text, by
construction, not case by case.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from ..errors import LetItLoopError, RunNotFoundError
from ..inspection import (
    STATES,
    Inspector,
    RunDetail,
    RunInfo,
    find_run,
    parse_since,
    show_run,
)
from ..inspection.queue_listing import WAITING, list_runs_and_entries
from ..runtext import render
from ..streams.chunks import Chunk
from . import timeline, values, views

HERE = Path(__file__).resolve().parent


def _finalize(value: Any) -> Any:
    """What every ``{{ … }}`` shows: nothing for None, markup as it is, any other value as
    safe text (then autoescaped)."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return values.shown(value)


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The templates (shipped in the package), escaping everything they are given."""
    return Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=True,
        finalize=_finalize,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _render(template: str, **context: Any) -> str:
    context.setdefault("root", "/")
    context.setdefault("standalone", False)
    context.setdefault("inline_css", None)
    return environment().get_template(template).render(**context)


def _one(query: Mapping[str, Sequence[str]], name: str) -> str:
    values = query.get(name) or [""]
    return values[-1].strip()


def runs_page(journal: Inspector, query: Mapping[str, Sequence[str]]) -> tuple[int, str]:
    """The runs page for the query's filters (``goal``, ``status`` repeated, ``name``,
    ``since``, ``offset``), newest first, :data:`views.RUNS_PER_PAGE` at a time: its HTTP
    status (400 for a filter it cannot read, with the reason on the page) and HTML."""
    goal, name, since_text = _one(query, "goal"), _one(query, "name"), _one(query, "since")
    queue = _one(query, "queue")
    statuses = [s for s in query.get("status", []) if s]
    form: dict[str, Any] = {
        "goal": goal,
        "status": statuses,
        "name": name,
        "since": since_text,
        "queue": queue,
    }
    try:
        offset = int(_one(query, "offset") or 0)
    except ValueError:
        offset = -1
    status, error, found = 200, None, []
    try:
        if offset < 0:
            raise LetItLoopError(
                f"offset expects a whole number >= 0, got {_one(query, 'offset')!r}"
            )
        since = None
        if since_text:
            try:
                since = parse_since(since_text)
            except ValueError as exc:
                raise LetItLoopError(str(exc)) from None
        found = list_runs_and_entries(
            journal,
            goal or None,
            status=statuses or None,
            since=since,
            name=name or None,
            limit=views.RUNS_PER_PAGE + 1,
            offset=offset,
            queue=queue or None,
        )
    except LetItLoopError as exc:  # a filter it cannot read, an unknown goal
        status, error = 400, str(exc)
    older = len(found) > views.RUNS_PER_PAGE
    found = found[: views.RUNS_PER_PAGE]

    def link(at: int) -> str:
        from urllib.parse import urlencode

        pairs = [(k, v) for k, v in form.items() if isinstance(v, str) and v]
        pairs += [("status", s) for s in statuses]
        return "/?" + urlencode([*pairs, ("offset", str(at))])

    html = _render(
        "runs.html",
        journal=str(journal.path),
        form=form,
        goals=journal.goal_names(limit=200),
        states=(*STATES, *WAITING),
        runs=[(r, views.run_cells(r)) for r in found],
        error=error,
        first=offset + 1 if found else 0,
        last=offset + len(found),
        newer=link(max(0, offset - views.RUNS_PER_PAGE)) if offset > 0 else None,
        older=link(offset + views.RUNS_PER_PAGE) if older else None,
    )
    return status, html


def run_context(
    journal: Inspector, detail: RunDetail, page: int, *, whole: bool = False
) -> dict[str, Any]:
    """What the run's templates need: the run, its summary, attempts, the page's steps."""
    run = detail.run
    by_attempt = journal.attempt_replays(run.id)
    replays = views.replay_counts(detail, [keys for _, keys in by_attempt])
    total = len(detail.rows)
    per_page = (total or 1) if whole else views.STEPS_PER_PAGE
    pages = max(1, math.ceil(total / per_page))
    page = min(max(1, page), pages)
    shown_steps = views.steps(detail, replays, (page - 1) * per_page, per_page)
    if whole:  # a file for a bug report: every value whole
        for st in shown_steps:
            if st.result is not None:
                st.result = values.full(st.row.result)
            if st.error is not None:
                st.error = values.Value(values.shown(st.row.error))
            if st.traceback is not None:
                st.traceback = values.Value(values.shown(st.row.traceback))
    tries = []
    for t in detail.tries:
        label = "killed" if t.ended == "crashed" else "retried" if t.next_at else "failed"
        then = (
            f"next try at {render.local_time(t.next_at)}"
            if t.next_at
            else "its process died during it"
            if t.ended == "crashed"
            else "no next try: the step raised"
        )
        tries.append((t, label, render.local_time(t.failed_at), then))
    streams = [
        views.stream_view(key, [Chunk.of_row(r) for r in journal.stream_chunks(run.id, key)], whole)
        for key in journal.stream_keys(run.id)
    ]
    return {
        "journal": str(journal.path),
        "run": run,
        "s": views.run_summary(detail),
        "attempts": timeline.attempts(detail, replays, by_attempt),
        "steps": shown_steps,
        "total_rows": total,
        "page": page,
        "pages": pages,
        "page_links": views.page_links(page, pages),
        "tries": tries,
        "events": [views.event_cells(e) for e in detail.supervisor_events],
        "streams": streams,
        "stamp": views.stamp(run, [st.last for st in streams]),
    }


def _page_number(query: Mapping[str, Sequence[str]]) -> int:
    try:
        return int(_one(query, "page") or 1)
    except ValueError:
        return 1


def run_page(journal: Inspector, ref: str, query: Mapping[str, Sequence[str]]) -> str:
    """A run's page (``ref``: its id, an id prefix, its name, or a goal for its newest run).
    Raises RunNotFoundError."""
    detail = show_run(journal, find_run(journal, ref))
    return _render("run.html", **run_context(journal, detail, _page_number(query)))


def run_update(
    journal: Inspector, ref: str, query: Mapping[str, Sequence[str]]
) -> tuple[str, str | None]:
    """For a live page: the run's stamp now, and the part of its page to swap in (None when
    the page's ``stamp`` is still the run's: nothing changed)."""
    run = find_run(journal, ref)
    then = _one(query, "stamp")
    if _unchanged(journal, run, then):
        return then, None
    detail = show_run(journal, run)
    context = run_context(journal, detail, _page_number(query))
    return context["stamp"], _render("run_body.html", **context)


def _unchanged(journal: Inspector, run: RunInfo, then: str) -> bool:
    """Whether the page stamped ``then`` shows the run as it is: the same state, and no chunk
    journaled after the last one of each stream it shows (one short read per stream)."""
    head, *marks = then.split("_")
    if head != views.stamp(run):
        return False
    keys = journal.stream_keys(run.id)
    if len(keys) != len(marks) or not all(m.lstrip("-").isdigit() for m in marks):
        return False
    return not any(
        journal.stream_chunks(run.id, k, int(m)) for k, m in zip(keys, marks, strict=True)
    )


def row_page(journal: Inspector, ref: str, seq: int) -> str:
    """One row of a run, its result, error and traceback whole. Raises RunNotFoundError."""
    run = find_run(journal, ref)
    row = next((r for r in journal.rows(run) if r.seq == seq), None)
    if row is None:
        raise RunNotFoundError(f"run {run.id} has no row {seq}", run=run.id)
    took = row.duration_ms / 1000 if isinstance(row.duration_ms, (int, float)) else None
    return _render(
        "row.html",
        journal=str(journal.path),
        run=run,
        row=row,
        label=timeline.label_of(row, run),
        started=render.local_time(row.started_at),
        took=render.duration(took),
        result=values.full(row.result) if row.status != "failed" else None,
        holder=views.holder_text(row),
    )


def error_page(journal: str, status: int, message: str) -> str:
    return _render("error.html", journal=journal, status=status, message=message)


def stylesheet() -> str:
    return (HERE / "static" / "ui.css").read_text(encoding="utf-8")


def standalone_run(journal: Inspector, run: RunInfo | str) -> str:
    """The run's page as one self-contained HTML file: styles inline, no script, every step
    and every value whole (``lil export RUN --format html``)."""
    detail = show_run(journal, run)
    css = stylesheet()
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    context = run_context(journal, detail, 1, whole=True)
    return _render(
        "run.html",
        **context,
        standalone=True,
        inline_css=Markup(css),
        # Nothing loads, nothing runs: the one style block is allowed by its hash.
        page_csp=f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'",
        exported=datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z"),
    )
