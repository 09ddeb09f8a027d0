"""What ``lil show --follow`` prints while it watches a run: a line per change, how it ended."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..inspection import RunDetail, RunInfo
from ..inspection.inspector_detail import StreamReads
from . import render
from .words import in_flight, quoted, until


def follow_line(detail: RunDetail) -> str:
    """One line of ``lil show --follow`` off a terminal: the time, the run, where it is."""
    r = detail.run
    of = f"/{detail.previous_steps}" if detail.previous_steps else ""
    done = [row.key for row in detail.rows if row.status == "done"]
    bits = [
        datetime.now().strftime("%H:%M:%S"),
        r.id,
        render.colour(r.state, r.state),
        f"{r.steps_done}{of} step{'' if (detail.previous_steps or r.steps_done) == 1 else 's'}",
        f"last: {done[-1] if done else '-'}",
    ]
    live = [f for f in r.in_flight if f.live]
    if live:
        now = (f"{f.key} (since {render.local_time(f.started_at)})" for f in live)
        bits.append("now: " + ", ".join(now))
    for p in r.pauses:
        bits.append(f"{p.status}: {p.key}{_deadline(p.status, p.until)}")
    return "  ".join(bits)


def _deadline(status: str, due: str | None) -> str:
    """`` (until 12:00:03)``; `` (timed out at …)`` for a wait past its deadline; nothing
    for a pause with no deadline (a wait without ``timeout=``)."""
    if not due:
        return ""
    left = until(due)
    if status == "waiting" and left is not None and left <= 0:
        return f" (timed out at {render.local_time(due)})"
    return f" (until {render.local_time(due)})"


def watcher_text(watcher: dict[str, Any]) -> str:
    """``waiting for lil watch 01J… (pid 12 on host) to restart it``: who resumes a crashed run."""
    return (
        f"waiting for lil watch {watcher.get('watch_id')} (pid "
        f"{watcher.get('watcher_pid')} on {watcher.get('host')}) to restart it"
    )


def follow_record(detail: RunDetail, watcher: dict[str, Any] | None) -> dict[str, Any]:
    """One record of ``lil show --follow --json``: where the run is, and who will restart it."""
    r = detail.run
    return {
        "run": r.id,
        "state": r.state,
        "steps_done": r.steps_done,
        "previous_steps": detail.previous_steps,
        "in_flight": [
            {"key": f.key, "started_at": f.started_at, "attempt": f.attempt}
            for f in r.in_flight
            if f.live
        ],
        "waiting_for": watcher,
        "at": datetime.now().astimezone().isoformat(),
    }


def end_line(r: RunInfo) -> str:
    """Why ``--follow`` stopped: the run failed, was cancelled, waits, or nothing resumes it."""
    if r.state == "failed":
        return f"run {r.id} failed: {render.fit(r.error or '-', 20)}"
    if r.state == "cancelled":
        return f"run {r.id} was cancelled: {render.fit(r.error or '-', 30)}"
    if r.state == "waiting":
        keys = ", ".join(repr(p.key) for p in r.pauses if p.status == "waiting")
        return (
            f"run {r.id} stopped to wait for {keys or 'outside input'}: send it "
            f"with lil send, then run its program again"
        )
    return nobody_resumes(r)


def nobody_resumes(r: RunInfo) -> str:
    """A crashed run, or a fork never opened, that no process holds and no lil watch restarts."""
    if r.state == "pending":
        what = f"run {r.id} is a fork that no process has opened"
    else:
        died = r.died_in
        where = " " + in_flight(died) if died else ""
        what = f"run {r.id} crashed (attempt {r.attempts} died{where})"
    named = f", run={r.name!r}" if r.name else ""
    return (
        f"{what}, and nothing is resuming it: no process holds it and no lil watch will "
        f"restart it. Run the goal's code again (Journal({r.goal!r}{named}), or under lil watch) "
        f"to resume it, then: {quoted('lil', 'show', r.id, '--follow')}"
    )


class StreamText:
    """The text of a run's streams as ``lil show --follow`` prints it while they grow.

    Off a terminal, each stream's new text is printed as it is journaled, after a
    ``<run>  stream <key>:`` line of its own (a ``reset`` says the call restarted);
    with ``--json``, one ``{"record": "chunk", …}`` line per chunk. ``after``: the
    offset read so far of each stream.
    """

    def __init__(self, journal: StreamReads, as_json: bool) -> None:
        self.journal, self.as_json = journal, as_json
        self.after: dict[str, int] = {}
        self.open: str | None = None  # the stream whose text ends the output
        self.texts: dict[str, str] = {}  # on a terminal: each stream's text since its reset

    def lines(self, run_id: str, keep: int = 600) -> list[str]:
        """On a terminal: a block per stream, its last ``keep`` characters (redrawn)."""
        for key in self.journal.stream_keys(run_id):
            for seq, _, kind, data, _, _ in self.journal.stream_chunks(
                run_id, key, self.after.get(key, -1)
            ):
                self.after[key] = seq
                if kind == "reset":
                    self.texts[key] = ""
                elif kind == "text":
                    self.texts[key] = (self.texts.get(key, "") + data)[-keep:]
        shown: list[str] = []
        for key, text in self.texts.items():
            shown += ["", f"stream {key}:", *render.block(text)]
        return shown

    def poll(self, run_id: str) -> None:
        """Print what the run's streams journaled since the last poll."""
        import click

        for key in self.journal.stream_keys(run_id):
            for seq, _, kind, data, _, _ in self.journal.stream_chunks(
                run_id, key, self.after.get(key, -1)
            ):
                self.after[key] = seq
                if self.as_json:
                    text = data if kind == "text" else ""
                    record = {"record": "chunk", "run": run_id, "key": key, "seq": seq}
                    click.echo(
                        render.json_text({**record, "kind": kind, "text": text}, indent=None)
                    )
                    continue
                if self.open != key:
                    self.end_line()
                    render.echo(f"{run_id}  stream {key}:")
                    self.open = key
                if kind == "text":
                    click.echo(render.safe(data), nl=False)
                elif kind == "reset":
                    self.end_line()
                    render.echo(f"{run_id}  stream {key}: restarted (what came before is dropped)")
                    self.open = key
                elif kind == "end":
                    self.end_line()

    def end_line(self) -> None:
        """End a stream's text that is still open, before another line is printed."""
        if self.open is not None:
            import click

            click.echo("")
            self.open = None
