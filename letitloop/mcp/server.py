"""``lil mcp``: the journal served to MCP clients over stdio (:func:`build_server`, :func:`serve`).

Eight tools, each a plain statement of what it does, each with structured
output (a JSON object) and honest annotations, so a client can tell from
the annotations alone which calls need a person's confirmation:

- read-only (``read_only_hint=True``): ``list_runs``, ``show_run``,
  ``export_run``, ``list_queues``. They open the journal read-only for each call (no
  migration, no lock file, no checkpoint: :mod:`letitloop.inspection`), so
  the server never changes the file unless an action tool is called.
- actions (``read_only_hint=False``): ``reset_run`` (deletes a run:
  destructive), ``cancel_run`` (ends a run for good: destructive),
  ``fork_run`` and ``send_value`` (add to the journal: not destructive);
  none is idempotent (a GOAL names its newest run, which a first call may
  change). They open the journal for writing, as ``lil reset/fork/cancel/send``
  do (:mod:`letitloop.maintenance`, :mod:`letitloop.supervision.control`).

Every tool touches only the journal file (``open_world_hint=False``). A
refusal (an unknown run, a missing journal, a run held by a live process) is
a result flagged ``is_error`` with one line saying what to do; the server
goes on serving.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from ..errors import LetItLoopError
from ..runtext.previews import clip, preview

if TYPE_CHECKING:
    from ..inspection import Inspector

#: The server's name, as clients show it.
SERVER_NAME = "letitloop"

#: The states ``list_runs`` filters by (``lil runs --status``): a run's, and a queue entry's.
STATES: tuple[str, ...] = ("running", "crashed", "pending", "waiting", "completed", "failed")
STATES += ("cancelled", "queued", "delayed")

#: ``show_run`` previews each result: one longer than this many characters of JSON is clipped
#: (``export_run``, and ``show_run`` with ``step``, give results whole).
PREVIEW_CHARS = 300

#: The longest error line a tool call returns: a message echoes values as short previews
#: (previews.py), and anything longer than this is clipped all the same.
ERROR_CHARS = 2000

READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
DELETES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
ADDS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)


class JournalServer(MCPServer):
    """``MCPServer`` whose refusal of bad arguments is one line, like every other refusal."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        from pydantic import ValidationError

        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            wrong = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in cause.errors()
            )
            raise ToolError(f"bad arguments for {name}: {wrong}") from None


@contextmanager
def journal(db: Path | None, *, write: bool = False) -> Iterator[Inspector]:
    """The journal for one tool call, as an inspector: read-only unless the tool changes it.

    The one place this module opens the journal, as ``lil`` does
    (``open_inspector``: ``--db``, else ``$LETITLOOP_DB``, else the nearest
    ``.letitloop/journal.db``); every refusal becomes a ``ToolError`` (an
    ``is_error`` result with its one line).
    """
    from ..inspection import open_inspector

    try:
        inspector = open_inspector(db, write=write, separate_process=True)
    except (LetItLoopError, OSError) as exc:
        raise ToolError(one_line(exc)) from None
    try:
        yield inspector
    except (LetItLoopError, OSError) as exc:
        raise ToolError(one_line(exc)) from None
    finally:
        inspector.close()


def one_line(exc: BaseException) -> str:
    """An error as the one line a client shows."""
    text = str(exc) if isinstance(exc, LetItLoopError) else f"{type(exc).__name__}: {exc}"
    # Values echoed go through previews.preview; this bounds whatever else a message carries.
    return clip(" ".join(text.split()), ERROR_CHARS)


def clipped(value: Any) -> Any:
    """A decoded result for a preview: text over :data:`PREVIEW_CHARS` clipped, with a mark."""
    import json

    text = json.dumps(value, ensure_ascii=False)
    if len(text) <= PREVIEW_CHARS:
        return value
    return {"clipped": text[:PREVIEW_CHARS] + "…", "chars": len(text)}


def build_server(db: Path | None = None) -> MCPServer:
    """The MCP server over the journal ``db`` (None: as ``lil`` finds it), not yet running.

    The file need not exist yet: each tool call opens it, and a call on a
    missing journal is an ``is_error`` result saying where it looked.
    """
    server = JournalServer(
        SERVER_NAME,
        instructions=(
            "letitloop's journal of durable runs: list runs, show or export one run "
            "(steps, results, errors, usage and cost), and reset, fork, cancel or send a "
            "value to a run."
        ),
    )

    @server.tool(
        title="List runs",
        description=(
            "Lists the journal's runs, newest first, with each run's state (running, "
            "crashed, pending, waiting, completed, failed, cancelled), steps done, error, "
            "usage and cost, and the step it is in. Filters: goal, states, start time "
            "(since/until: a duration ago such as 2h or 7d, or an ISO date/time), a glob on "
            "the run's name, values of its recorded input, and a work queue's name. A work "
            "queue's entry no worker started yet is listed too (state queued or delayed), and "
            "each queue's run has its queue, entry, priority and entry state in 'queue'."
        ),
        annotations=READ,
        structured_output=True,
    )
    def list_runs(
        goal: str | None = None,
        states: list[str] | None = None,
        since: str | None = None,
        until: str | None = None,
        name: str | None = None,
        inputs: dict[str, str] | None = None,
        limit: int = 50,
        offset: int = 0,
        queue: str | None = None,
    ) -> dict[str, Any]:
        from ..inspection import json_ready
        from ..inspection.queue_listing import list_runs_and_entries as listed

        for state in states or ():
            if state not in STATES:
                raise ToolError(
                    f"unknown state {preview(state)}; expected some of {', '.join(STATES)}"
                )
        if limit < 0 or offset < 0:
            raise ToolError(f"expected limit and offset >= 0, got {limit} and {offset}")
        if name is not None and not name:
            raise ToolError("expected a glob for name (user-*, 2026-11-?), got ''")
        start, end = when(since, "since"), when(until, "until")
        with journal(db) as inspector:
            found = listed(
                inspector,
                goal,
                status=states or None,
                since=start,
                until=end,
                name=name,
                inputs=sorted((inputs or {}).items()),
                limit=limit + 1 if limit else None,
                offset=offset,
                queue=queue,
            )
            path = str(inspector.path)
        more = bool(limit) and len(found) > limit
        runs = found[:limit] if limit else found
        return {
            "journal": path,
            "runs": json_ready([r.as_dict() for r in runs]),
            "more": more,
        }

    @server.tool(
        title="Show a run",
        description=(
            "Shows one run: its state, input, result, error, usage and cost, attempts and "
            "how each ended, the step it is in or died in, and its steps in journal order "
            "with their status, duration, error and result (long results clipped; pass "
            "step for one step whole, with its traceback). run is a run id, a unique id "
            "prefix, a run name, or a goal (its newest run). A work queue's entry no "
            "worker started yet (its id or run name) is returned as 'queue_entry' alone."
        ),
        annotations=READ,
        structured_output=True,
    )
    def show_run(run: str, step: str | None = None) -> dict[str, Any]:
        from ..errors import RunNotFoundError
        from ..inspection import export_run, find_run
        from ..inspection.queue_listing import find_entry, queue_entries

        with journal(db) as inspector:
            try:
                found = find_run(inspector, run)
            except RunNotFoundError:
                try:
                    return {"queue_entry": find_entry(inspector, run).as_dict()}
                except RunNotFoundError:
                    pass
                raise
            doc = export_run(inspector, found)
            entry = queue_entries(inspector, run_ids=[found.id])[:1]
        doc["queue_entry"] = entry[0].as_dict() if entry else None
        info = doc["run"]
        info.pop("input_json", None)
        info.pop("result_json", None)
        crashed_in = None
        if info.get("state") == "crashed":
            last = [f for f in info["in_flight"] if f["attempt"] == info["attempts"]]
            crashed_in = last[0]["key"] if last else None
        info["died_in"] = crashed_in
        if step is not None:
            rows = [r for r in doc["rows"] if r["key"] == step]
            if not rows:
                keys = ", ".join(repr(r["key"]) for r in doc["rows"][:10]) or "none"
                raise ToolError(f"run {info['id']} has no step {preview(step)}; its keys: {keys}")
            return {"run": info, "step": rows[0]}
        for row in doc["rows"]:
            row.pop("result_json", None)
            row.pop("traceback", None)
            row["result"] = clipped(row["result"])
        info["result"] = clipped(info.get("result"))
        info["input"] = clipped(info.get("input"))
        doc["run"] = info
        return doc

    @server.tool(
        title="List work queues",
        description=(
            "Lists the journal's work queues: entries per state (queued, delayed, running, "
            "crashed: its worker died, the next takes it over; completed, failed, cancelled), "
            "when the longest-waiting due entry became due, and the pid@host of its workers."
        ),
        annotations=READ,
        structured_output=True,
    )
    def list_queues(queue: str | None = None) -> dict[str, Any]:
        from ..inspection.queue_listing import queue_stats

        with journal(db) as inspector:
            stats = queue_stats(inspector, queue)
            path = str(inspector.path)
        return {"journal": path, "queues": [q.as_dict() for q in stats]}

    @server.tool(
        title="Export a run",
        description=(
            "Returns one run whole, as lil export does: the run with its decoded input and "
            "result, every step and marker row with its decoded result beside the stored "
            "JSON text, failed tries, attempts, lil watch events and usage totals. run is a "
            "run id, a unique id prefix, a run name, or a goal (its newest run)."
        ),
        annotations=READ,
        structured_output=True,
    )
    def export_run(run: str) -> dict[str, Any]:
        from ..inspection import export_run as exported
        from ..inspection import find_run

        with journal(db) as inspector:
            return exported(inspector, find_run(inspector, run))

    @server.tool(
        title="Reset a run",
        description=(
            "Deletes a run with its attempts, steps and run-scoped markers, so that the "
            "goal's next opener starts afresh (or resumes an older unfinished run). run is a "
            "run id, a unique id prefix, a run name, or a goal: the run Journal(goal) would "
            "resume. Refused for a run a live process holds. With dry_run, only says which "
            "run it would delete."
        ),
        annotations=DELETES,
        structured_output=True,
    )
    def reset_run(run: str, dry_run: bool = False) -> dict[str, Any]:
        from ..inspection import json_ready, resumable_run
        from ..maintenance import reset_run as forget
        from ..maintenance import reset_target

        with journal(db, write=not dry_run) as inspector:
            if dry_run:
                return {"would_delete": json_ready(reset_target(inspector, run).as_dict())}
            gone = forget(inspector, run)
            nxt = resumable_run(inspector, gone.goal)
        return {
            "deleted": json_ready(gone.as_dict()),
            "next_open_resumes": None if nxt is None else nxt.id,
        }

    @server.tool(
        title="Fork a run",
        description=(
            "Makes a new run of the same goal that keeps the source run's results before "
            "from_step and runs from_step and every later step again; the goal's next "
            "opener resumes the fork. A named source's name passes to the fork (the "
            "source is renamed NAME@ID). run is a run id, a unique id prefix or a run name."
        ),
        annotations=ADDS,
        structured_output=True,
    )
    def fork_run(run: str, from_step: str) -> dict[str, Any]:
        from ..inspection import json_ready
        from ..maintenance import fork_run as forked
        from ..runtext.changes import fork_record

        with journal(db, write=True) as inspector:
            made: dict[str, Any] = json_ready(fork_record(forked(inspector, run, from_step)))
        return made

    @server.tool(
        title="Cancel a run",
        description=(
            "Cancels a run: one no process holds is cancelled at once; the process holding "
            "a live one stops at its next step. No opener resumes a cancelled run. run is a "
            "run id, a unique id prefix, a run name, or a goal (its newest run); reason is "
            "recorded with the cancel."
        ),
        annotations=DELETES,
        structured_output=True,
    )
    def cancel_run(run: str, reason: str | None = None) -> dict[str, Any]:
        from ..inspection import json_ready
        from ..runtext.changes import cancel_record
        from ..supervision.control import cancel_run as cancelled

        with journal(db, write=True) as inspector:
            done = cancelled(inspector, run, reason=reason)
        record: dict[str, Any] = json_ready(cancel_record(done, done.run))
        return record

    @server.tool(
        title="Send a value to a waiting run",
        description=(
            "Writes value (any JSON) into the wait named name of a run waiting for outside "
            "input (wait_for): the run gets it back from wait_for and replays it on every "
            "later attempt. A wait takes one value, only while the run waits for that name. "
            "run is a run id, a unique id prefix, a run name, or a goal (its newest run "
            "waiting for name)."
        ),
        annotations=ADDS,
        structured_output=True,
    )
    def send_value(run: str, name: str, value: Any) -> dict[str, Any]:
        from .. import codec
        from ..runtext.changes import sent_record
        from ..supervision.control import send_text

        try:
            text = codec.encode(value)
        except LetItLoopError as exc:
            raise ToolError(one_line(exc)) from None
        with journal(db, write=True) as inspector:
            sent = send_text(inspector, run, name, text)
        return sent_record(sent)

    return server


def when(text: str | None, field: str) -> Any:
    """``since``/``until`` as ``lil runs`` reads them: a duration ago (2h, 7d) or a date/time."""
    if text is None:
        return None
    from ..inspection import parse_since

    try:
        return parse_since(text)
    except ValueError as exc:
        raise ToolError(f"{field}: {exc}") from None


def serve(db: Path | None = None) -> None:
    """Serve the journal over stdio until the client closes the connection (``lil mcp``)."""
    build_server(db).run("stdio")
