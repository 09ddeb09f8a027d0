"""``MemoryInspector``: the :class:`~letitloop.inspection.inspector.Inspector` on the in-memory
store (``memory://NAME``, ``memory_database.py``), so that ``letitloop.inspection``,
``letitloop.maintenance`` and ``letitloop.supervision.control`` read and change its runs
as they do a journal file's, in the process whose memory holds them.

What it reads is the database the journals of this process write
(``MemoryDatabase``): each read and each change runs under the database's
lock, and each change counts as a commit, so a journal of the process
notices it as it notices another connection's (a value sent to its wait).
A run is held through the database's holds, as a journal holds it. There
is no supervisor here (``lil watch`` is another process): no supervisor
events; nothing to sweep or to compact. ``lil``, a process of its own,
never reaches this store (``schemes.open_inspector`` refuses it).

Here: opening it, and changing runs (reset, fork, a value sent, a cancel)
and collecting garbage; its bases find and read them: ``memory_runs.py``
(transactions, holds, goals and runs) and ``memory_detail.py`` (one run in
detail).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import JournalFileError
from ..integrity.checksums import pause_sum
from ..integrity.seals import env_seal_key
from ..stores.memory.database import existing
from ..stores.memory.seals import start
from .fork_copies import bind_copies
from .images import RunImage
from .inspector_changes import WaitAnswer
from .memory_copy import add_images, memory_image
from .memory_detail import MemoryDetail
from .records import RunInfo, WaitRow


def open_memory_inspector(location: str, *, write: bool = False) -> MemoryInspector:
    """The inspector of ``memory://NAME``, which a journal of this process must have opened.

    Read-only unless ``write``. Raises JournalFileError when no journal of
    this process opened it (there is nothing to read; nothing is created).
    """
    db = existing(location)
    if db is None:
        raise JournalFileError(
            f"{location}: no journal of this process opened this in-memory store, so it holds "
            f"no runs; expected the memory://NAME a Journal of this process used (its runs "
            f"live as long as the process that made them)",
            path=location,
        )
    return MemoryInspector(db, write=write)


_COPIED = (
    "kind",
    "status",
    "fn",
    "result",
    "started_at",
    "finished_at",
    "duration_ms",
    "error",
    "traceback",
    "wake_at",
    "args_fp",
    "model",
)


class MemoryInspector(MemoryDetail):
    """The inspector of one in-memory database (see the module's docstring)."""

    # -- lil copy (memory_copy.py) -----------------------------------------------------

    def run_image(self, run: RunInfo) -> RunImage:
        """Everything ``run`` owns, read under the database's lock."""
        with self._reading() as db:
            return memory_image(db, run.id)

    def add_runs(self, images: Sequence[RunImage]) -> None:
        """The runs of ``images`` added in one change."""
        with self._changing() as db:
            add_images(db, images)

    # -- changes ----------------------------------------------------------------------

    def delete_runs(self, runs: list[RunInfo]) -> int:
        with self._changing() as db:
            deleted = 0
            for run in runs:
                for row in self._rows_of(run.goal, run.id):
                    del db.goals[run.goal][(row["run"], row["key"])]
                    del db.by_rowid[row.rowid]
                    deleted += 1
                db.runs.pop(run.id, None)
                db.seals.pop(run.id, None)  # its chain (PostgreSQL: ll_seals' ON DELETE)
            ids = {run.id for run in runs}
            for slot in [t for t in db.tries if t[0] in ids]:
                del db.tries[slot]
            db.replays[:] = [r for r in db.replays if r[0] not in ids]
            for held in [r for r in db.reservations if r[0] in ids]:
                del db.reservations[held]
            db.attempts[:] = [a for a in db.attempts if a[0] not in ids]
            for traced in [t for t in db.traces if t[0] in ids]:
                del db.traces[traced]
            for ended in [t for t in db.endings if t[0] in ids]:
                del db.endings[ended]
            for streamed in [s for s in db.chunks if s[0] in ids]:
                del db.chunks[streamed]
        return deleted

    def fork(
        self,
        source: RunInfo,
        new_id: str,
        at: str,
        from_step: str,
        before_seq: int,
        rename_source: str | None,
    ) -> None:
        with self._changing() as db:
            # The copies first, bound to the new run (fork_copies.py): a refusal (an
            # encrypted value without the key) leaves the database as it was.
            copies = [
                {**{c: row[c] for c in _COPIED}, "key": row["key"]}
                for row in self._rows_of(source.goal, source.id)
                if row.rowid < before_seq and row["status"] == "done"
            ]
            bind_copies(copies, source, new_id)
            old = db.runs[source.id]
            if rename_source is not None:
                old["name"] = rename_source
            db.runs[new_id] = {
                **dict.fromkeys(old),
                "id": new_id,
                "goal": old["goal"],
                "name": source.name,
                "status": "running",
                "attempts": 0,
                "started_at": at,
                "updated_at": at,
                "input": old["input"],
                "input_fp": old["input_fp"],
                "forked_from": source.id,
                "forked_at": from_step,
                "order": db.run_order(),
            }
            rows = db.goals[source.goal]
            made = []
            for values in copies:
                copy = db.new_row()
                copy.update(values, run=new_id, attempt=0)
                rows[(new_id, values["key"])] = copy
                made.append(copy)
            before = {
                r["key"] for r in self._rows_of(source.goal, source.id) if r.rowid < before_seq
            }
            for (run, key), chunks in list(db.chunks.items()):
                if run == source.id and key in before:  # the streams of the steps kept
                    db.chunks[(new_id, key)] = list(chunks)
            secret = env_seal_key()
            if secret is not None:  # the copies sealed, as a file's fork seals them
                start(db.seals, made, new_id, secret)

    def answer_wait(
        self, run: RunInfo, choose: Callable[[list[WaitRow]], WaitAnswer]
    ) -> WaitAnswer:
        with self._changing():
            waits = [r for r in self._rows_of(run.goal, run.id) if r["kind"] == "wait"]
            answer = choose(
                [
                    WaitRow(
                        r["key"],
                        r["status"],
                        r["error"],
                        r["started_at"],
                        r["finished_at"],
                        r["wake_at"],
                    )
                    for r in waits
                ]
            )
            for r in waits:
                if r["key"] == answer.key and r["status"] == "waiting":
                    r.update(
                        status="done",
                        result=answer.result,
                        error=None,
                        finished_at=answer.finished_at,
                        duration_ms=answer.duration_ms,
                        checksum=pause_sum(run.id, answer.key, "wait", answer.result, None),
                    )
        return answer

    def cancel_now(self, run_id: str, at: str, reason: str, error: str) -> None:
        with self._changing() as db:
            run = db.runs.get(run_id)
            if run is None or run["status"] in ("completed", "cancelled"):
                return
            run.update(
                status="cancelled",
                cancel_requested_at=run["cancel_requested_at"] or at,
                cancel_reason=run["cancel_reason"] or reason,
                finished_at=at,
                updated_at=at,
                error=error,
            )

    def request_cancel(self, run_id: str, at: str, reason: str) -> None:
        with self._changing() as db:
            run = db.runs.get(run_id)
            if run is None or run["status"] in ("completed", "cancelled"):
                return
            run.update(
                cancel_requested_at=run["cancel_requested_at"] or at,
                cancel_reason=run["cancel_reason"] or reason,
                updated_at=at,
            )

    # -- gc ---------------------------------------------------------------------------

    # -- work queues: a queue lives in a journal file or on PostgreSQL, never here --------

    def queue_rows(
        self,
        queue: str | None = None,
        *,
        ids: Sequence[str] | None = None,
        run_ids: Sequence[str] | None = None,
        run_names: Sequence[str] | None = None,
        unstarted: bool = False,
        limit: int | None = None,
        status: str | None = None,
    ) -> list[dict[str, Any]]:
        return []

    def queue_counts(self, queue: str | None, now: str) -> list[tuple[str, str, bool, int, str]]:
        return []

    def queue_parents(self, run_ids: Sequence[str]) -> dict[str, str]:
        return {}

    def queue_held(self, entry_ids: Sequence[str]) -> set[str]:
        return set()

    def delete_queue_entries(self, entry_ids: Sequence[str]) -> int:
        return 0

    def cancel_entry(self, entry_id: str, at: str, error: str) -> bool:
        return False

    def requeue_entry(self, entry_id: str, run_id: str) -> bool:
        return False

    def add_queue_rows(self, rows: Sequence[dict[str, Any]]) -> int:
        if rows:
            raise JournalFileError(
                f"{self.path}: a memory:// store holds no work queue (a Queue lives in a "
                f"journal file or on PostgreSQL); copy the queue's runs to a file or a "
                f"PostgreSQL database instead",
                path=str(self.path),
            )
        return 0

    def supervisor_events_before(self, at: str, going: set[str]) -> int:
        return 0  # it has none (see supervisor_events)

    def delete_supervisor_events(self, at: str) -> int:
        return 0

    def empty_goals(self, going: set[str]) -> list[str]:
        with self._reading():
            return self._empty_goals(going)

    def drop_empty_goals(self) -> list[str]:
        with self._changing() as db:
            gone = self._empty_goals(set())
            for goal in gone:
                for row in db.goals.pop(goal).values():
                    db.by_rowid.pop(row.rowid, None)
                db.key_checks.pop(goal, None)  # no value is left under its key
        return gone

    def size(self) -> int:
        """The characters of text it holds (runs, rows and tries): not bytes on a disk."""
        with self._reading() as db:
            values: list[Any] = [v for r in db.runs.values() for v in r.values()]
            values += [v for rows in db.goals.values() for r in rows.values() for v in r.values()]
            values += [v for t in db.tries.values() for v in t.values()]
            return sum(len(v) for v in values if isinstance(v, str))

    def sweep_locks(self) -> None:
        """Nothing to sweep: a holder that dies here (``abandon``) lets go of its holds."""

    def compact(self) -> None:
        """Nothing to give back: what was deleted is gone from memory."""
