"""What the commands that change a journal say they did: reset, fork, gc, send, cancel and
copy."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import render
from .words import quoted

if TYPE_CHECKING:
    from ..inspection import RunInfo
    from ..inspection.entries import QueueEntry
    from ..maintenance import CopyResult, ForkResult, GcResult
    from ..supervision.control import Cancelled, Sent


def reset_target_text(target: RunInfo) -> str:
    """The run ``lil reset`` would forget, in words (asked about, or printed by --dry-run)."""
    return (
        f"run {target.id} of goal {target.goal!r} ({target.state}, "
        f"{render.counted(target.steps_done, 'step')} done, "
        f"{render.counted(target.markers, 'marker')})"
    )


def reset_line(gone: RunInfo, nxt: RunInfo | None, entry: QueueEntry | None = None) -> str:
    """``lil reset``: the run it forgot, and what the goal's next Journal does (for a work
    queue's run, ``entry`` put back in its queue: what its next worker does)."""
    goal = gone.goal
    then = f"the next Journal({goal!r}) " + (f"resumes run {nxt.id}" if nxt else "starts a new run")
    if gone.name:
        then = f"the next Journal({goal!r}) with run={gone.name!r} starts a new run"
    if entry is not None:
        then = (
            f"its entry {entry.id} is back in queue {entry.queue!r} ({entry.state}): a worker "
            f"runs it again from its first step"
        )
    return (
        f"forgot run {gone.id} of goal {goal!r} ({render.counted(gone.steps_done, 'step')}, "
        f"{render.counted(gone.markers, 'marker')}); {then}"
    )


def fork_record(result: ForkResult) -> dict[str, Any]:
    """``lil fork --json``: the fork, its source, the keys it kept and the source's new name."""
    return {
        "run": result.run.as_dict(),
        "source": result.source.as_dict(),
        "copied": result.copied,
        "source_renamed_to": result.source_renamed_to,
    }


def fork_lines(result: ForkResult, from_step: str) -> list[str]:
    """``lil fork``: what the fork kept, what it runs again, and how to resume it."""
    new, src = result.run, result.source
    kept = ", ".join(result.copied[:5]) + (", …" if len(result.copied) > 5 else "")
    out: list[str] = []
    out.append(f"forked run {src.id} of goal {src.goal!r} from step {from_step!r}")
    out.append(
        f"new run {new.id} keeps {render.counted(len(result.copied), 'recorded result')}"
        f"{' (' + kept + ')' if kept else ''}"
    )
    out.append(f"and re-executes {from_step!r} and every step after it.")
    if result.source_renamed_to:
        out.append(
            f"It took over the name {new.name!r}; the source is now named "
            f"{result.source_renamed_to!r}."
        )
        out.append(f"Next: Journal({src.goal!r}, run={new.name!r}) resumes the fork.")
    elif new.input_json is not None:
        # An unnamed run with an input (a @durable call's arguments) is resumed only by an
        # opener of the same input, never by a bare Journal(goal).
        shown = render.fit(new.input_json, 60)
        out.append(
            f"Next: the call with the same arguments resumes the fork: the @durable function "
            f"of goal {src.goal!r} called with the same arguments ({shown}), or "
            f"Journal({src.goal!r}, input=<the same input>)."
        )
    else:
        out.append(f"Next: Journal({src.goal!r}) resumes the fork.")
    if src.state in ("failed", "crashed"):
        opener = "that call" if src.input_json is not None else f"Journal({src.goal!r})"
        out.append(
            f"Note: run {src.id} is still unfinished; once the fork completes, "
            f"{opener} would resume it; to forget it: {quoted('lil', 'reset', src.id)}"
        )
    return out


def gc_target_text(result: GcResult) -> str:
    """What ``lil gc`` would remove, in words (asked about before it removes it)."""
    rows = render.counted(result.rows_deleted, "step and marker", "steps and markers")
    what = f"{render.counted(len(result.removed), 'run')} ({rows})"
    if result.goals_removed:
        what += f" and {render.counted(len(result.goals_removed), 'goal')} left empty"
    if result.queue_entries_removed:
        n = len(result.queue_entries_removed)
        what += f" and {render.counted(n, 'ended queue entry', 'ended queue entries')}"
    return what


def gc_records(result: GcResult) -> list[dict[str, Any]]:
    """``lil gc --jsonl``: a record per run removed, then one per goal removed."""
    return (
        [{"record": "run", **r.as_dict()} for r in result.removed]
        + [{"record": "goal", "goal": g} for g in result.goals_removed]
        + [{"record": "queue_entry", "id": e} for e in result.queue_entries_removed]
    )


def gc_lines(result: GcResult, dry_run: bool) -> list[str]:
    """``lil gc``: a table of the runs removed, the ones kept, the goals removed, a summary."""
    out: list[str] = []
    verb = "would remove" if dry_run else "removed"
    if result.removed:
        rows = [
            [r.id, r.goal, r.state, str(r.steps_done), render.local_time(r.updated_at, short=True)]
            for r in result.removed
        ]
        out.extend(render.table(["RUN", "GOAL", "STATE", "STEPS", "LAST SEEN"], rows, right=(3,)))
    for r in result.skipped_live:
        out.append(f"kept run {r.id} of goal {r.goal!r}: a live process holds it")
    for r in result.skipped_queued:
        out.append(
            f"kept run {r.id} of goal {r.goal!r}: its queue entry {r.name} is still "
            f"queued or claimed"
        )
    for g in result.goals_removed:
        out.append(f"{verb} goal {g!r} (no run left) and its journal table")
    deleted = render.counted(result.rows_deleted, "step and marker", "steps and markers")
    summary = f"{verb} {render.counted(len(result.removed), 'run')} ({deleted})"
    if result.supervisor_events_deleted:
        summary += f" and {render.counted(result.supervisor_events_deleted, 'supervisor event')}"
    if result.goals_removed:
        summary += f"; {render.counted(len(result.goals_removed), 'goal')}"
    if result.queue_entries_removed:
        summary += (
            f"; {render.counted(len(result.queue_entries_removed), 'queue entry', 'queue entries')}"
        )
    if not dry_run and (result.removed or result.goals_removed or result.queue_entries_removed):
        summary += f"; file {result.bytes_before:,} → {result.bytes_after:,} bytes"
    out.append(summary)
    return out


def sent_line(sent: Sent, value: Any) -> str:
    """``lil send``: the value sent, to which wait of which run, and who gets it when."""
    run = sent.run
    shown = render.fit(render.json_text(value, indent=None), 40)
    then = (
        f"the process waiting in it (pid {run.holder_pid} on {run.holder_host}) wakes now"
        if sent.live
        else "no process holds the run: run its program again to resume it (it gets the value)"
    )
    return f"sent {shown} to {sent.key!r} of run {run.id} (goal {run.goal!r}); {then}"


def sent_record(sent: Sent) -> dict[str, Any]:
    """``lil send --json``."""
    run = sent.run
    return {"run": run.id, "goal": run.goal, "key": sent.key, "live": sent.live}


def cancel_record(done: Cancelled, run: RunInfo) -> dict[str, Any]:
    """``lil cancel --json``: the run as it is now, and whether it was cancelled at once."""
    return {"run": run.as_dict(), "at_once": done.at_once, "already": done.already}


def cancel_line(done: Cancelled, run: RunInfo) -> str:
    """``lil cancel``: cancelled at once, or its holder asked to stop."""
    if done.at_once and run.queue is not None and not run.attempts:
        return f"cancelled queue {run.queue.queue!r}'s entry {run.id}: it never starts"
    if done.at_once:
        return f"cancelled run {run.id} of goal {run.goal!r}; no process held it"
    asked = "was asked to stop already" if done.already else "is asked to stop"
    return (
        f"run {run.id} of goal {run.goal!r} {asked}: its process (pid {run.holder_pid} on "
        f"{run.holder_host}) gets RunCancelledError at its next step, marker or wait"
    )


def still_held_text(run: RunInfo, waited: float) -> str:
    """``lil cancel --wait``'s error when the holder has not stopped in time."""
    return (
        f"run {run.id} is still held by pid {run.holder_pid} after {waited:g} s "
        f"(a step that does not return cannot be interrupted); it stops at its "
        f"next step"
    )


def stopped_line(run: RunInfo) -> str:
    """``lil cancel --wait``: the state of a run whose holder stopped."""
    return f"run {run.id} is {run.state} now"


def rerun_hint(run: RunInfo) -> str:
    """After a cancel: how to run the run again from a step."""
    return f"to run it again from a step: lil fork {run.id} --from-step KEY"


def copy_lines(result: CopyResult) -> list[str]:
    """What ``lil copy`` did: the runs copied and skipped, then how they were verified."""
    runs = f"{len(result.copied)} run{'' if len(result.copied) == 1 else 's'}"
    lines = [f"copied {runs} ({result.rows} rows) from {result.source} to {result.target}"]
    if result.skipped:
        lines.append(
            f"skipped {len(result.skipped)} run{'' if len(result.skipped) == 1 else 's'} "
            f"{result.target} has already (--skip-existing)"
        )
    if result.copied:
        lines.append(
            f"verified: every run copied reads back from {result.target} as in the source "
            f"(its rows and sealed chain, as lil verify reads them)"
        )
    if result.queue_entries:
        n = result.queue_entries
        lines.append(
            f"copied {render.counted(n, 'work-queue entry', 'work-queue entries')} with them"
        )
    if result.sealed:
        lines.append(f"{result.sealed} sealed run(s): chains verified with LETITLOOP_SEAL_KEY")
    if result.unchecked:
        lines.append(
            f"{result.unchecked} sealed run(s) not checked with their key: set "
            f"LETITLOOP_SEAL_KEY and run lil verify --all --db {result.target}"
        )
    return lines


def copy_record(result: CopyResult) -> dict[str, Any]:
    """``lil copy --json``: what was copied, skipped and verified."""
    return {
        "source": result.source,
        "target": result.target,
        "copied": result.copied,
        "queue_entries": result.queue_entries,
        "skipped": result.skipped,
        "rows": result.rows,
        "sealed_verified": result.sealed,
        "sealed_unchecked": result.unchecked,
    }
