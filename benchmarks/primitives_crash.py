"""The primitives under random SIGKILL: retries, sleeps, waits, cancels, usage; N trials.

    python -m benchmarks.primitives_crash [--trials 100] [--seed S] [--no-write]

Each trial runs benchmarks/primitives_pipeline.py (sync or async, in turn)
as one named run and SIGKILLs it one to four times at random moments: in a
step, in a failed try or the backoff after it, in the sleep, while it waits
for its value, right after the value was sent, right after a cancel. The
harness sends the value the run waits for at a random moment (while the
child waits, or while it is dead), and in one trial of four cancels the run
at a random moment. The side log (outside the journal) and the journal,
read from a second connection, are then checked against each other:

- a step that returned never ran again; the run completed with the value
  sent, and its usage adds up to what its steps reported (3,300 tokens, 0.03);
- no try began before the time recorded for it (the backoff was not
  skipped), and the sleep did not wake before its recorded wake-up time;
- a cancelled run stays cancelled: a later start of its program is refused
  at open and runs nothing.

It also reports how late a resumed backoff or sleep ended, past its
recorded time or the restarted process's open, whichever was later ("late"
here includes a busy machine's scheduling): a backoff or sleep restarted
from zero would be late by the whole backoff or sleep.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import publish, table
from letitloop.errors import LetItLoopError

HERE = Path(__file__).resolve().parent
PIPELINE = HERE / "primitives_pipeline.py"

#: Lateness past which a resumed backoff or sleep counts as "late" in the report.
LATE_S = 0.25


@dataclass
class Trial:
    mode: str
    cancel: bool
    outcome: str = ""
    kills: list[str] = field(default_factory=list)
    returned_then_rerun: int = 0
    backoff_skipped: int = 0
    backoff_late: int = 0
    sleep_early: int = 0
    sleep_late: int = 0
    wrong_value: int = 0
    usage_wrong: int = 0
    resumed_after_cancel: int = 0
    unexpected_exit: str = ""


def _events(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [ln.split() for ln in log.read_text(encoding="utf-8").splitlines() if ln]


def _sql(db: Path, query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    if not db.exists():
        return []
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute(query, params).fetchall()
    except sqlite3.OperationalError:
        return []  # the schema is not there yet
    finally:
        conn.close()


def _where(events: list[list[str]], pid: int, db: Path, name: str) -> str:
    """What the killed process was doing, from its last event (and the flaky step's row)."""
    mine = [e for e in events if int(e[1]) == pid]
    if not mine:
        return "start-up"
    what = mine[-1][2:]
    if what in (["start", "flaky"], ["returned", "prepare"]):
        status = _sql(
            db,
            "SELECT j.status FROM journal_prim j JOIN runs r ON r.id = j.run "
            "WHERE r.name = ? AND j.key = 'flaky'",
            (name,),
        )
        if status == [("retrying",)]:
            return "in the backoff between two tries"
        return "in a try of the step with a retry policy"
    if what[0] == "start":
        return f"in {what[1]}"
    if what == ["returned", "flaky"]:
        return "in the sleep"
    if what == ["woke", "nap"]:
        return "waiting for its value"
    if what[0] == "attempt":
        return "replaying"
    return f"after {what[0]}"


def run_trial(n: int, mode: str, cancel: bool, rng: random.Random, db: Path, folder: Path) -> Trial:
    from letitloop import cancel as cancel_run
    from letitloop import send
    from letitloop.errors import NotWaitingError

    trial = Trial(mode, cancel)
    log = folder / f"side-{n}.log"
    name = f"trial-{n}"
    value = f"value-{n}"
    kills_left = rng.randint(1, 4)
    sent = cancelled = False
    send_at: float | None = None
    started = time.time()
    cancel_at = started + rng.uniform(0.1, 1.5) if cancel else None
    deadline = started + 90
    while True:
        child = subprocess.Popen(
            [sys.executable, str(PIPELINE), str(db), str(log), str(n), mode],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Half the kills early (start-up, replay, the first steps), half anywhere.
        early = rng.random() < 0.5
        kill_at = time.time() + rng.uniform(*((0.1, 0.45) if early else (0.05, 1.5)))
        kill_at = kill_at if kills_left else None
        killed = ""
        while child.poll() is None and not killed:
            now = time.time()
            if now > deadline:
                child.kill()
                child.wait()
                trial.outcome = "hung"
                return trial
            if not sent and send_at is None:
                waiting = _sql(
                    db,
                    "SELECT 1 FROM journal_prim j JOIN runs r ON r.id = j.run "
                    "WHERE r.name = ? AND j.key = 'approval' AND j.status = 'waiting'",
                    (name,),
                )
                if waiting:
                    send_at = now + rng.uniform(0, 0.3)
            if not sent and send_at is not None and now >= send_at:
                try:
                    send(name, "approval", value, path=db)
                except NotWaitingError:
                    if not cancelled:
                        raise
                    # cancelled between the harness seeing it wait and this send: the
                    # documented answer to a send to a cancelled run
                sent = True
                if kills_left and rng.random() < 0.3:
                    killed = "right after the value was sent"
            if cancel_at is not None and not cancelled and now >= cancel_at:
                with contextlib.suppress(LetItLoopError):  # it completed first: nothing to cancel
                    cancel_run(name, path=db)
                cancelled = True
                if kills_left and rng.random() < 0.5:
                    killed = "right after a cancel"
            if kill_at is not None and now >= kill_at:
                killed = _where(_events(log), child.pid, db, name)
            if not killed:
                time.sleep(0.005)
        if killed and child.poll() is None:
            child.send_signal(signal.SIGKILL)
            kills_left -= 1
            trial.kills.append(killed)
        _, err = child.communicate()
        if killed:
            continue
        if child.returncode == 0:
            trial.outcome = "completed"
            break
        if cancelled and "RunCancelledError" in err:
            trial.outcome = "cancelled"
            break
        if not sent and "RunCancelledError" not in err and child.returncode != 0:
            trial.unexpected_exit = err.strip().splitlines()[-1] if err.strip() else "?"
            trial.outcome = "unexpected exit"
            break
    _check(trial, db, log, name, value)
    return trial


def _at(iso: object) -> float:
    from datetime import datetime

    return datetime.fromisoformat(str(iso)).timestamp()


def _check(trial: Trial, db: Path, log: Path, name: str, value: str) -> None:
    events = _events(log)
    returned: set[str] = set()
    for e in events:
        if e[2] == "returned":
            returned.add(e[3])
        elif e[2] == "start" and e[3] in returned:
            trial.returned_then_rerun += 1
    opened = {int(e[1]): float(e[0]) for e in events if e[2] == "attempt"}
    (run_id,) = _sql(db, "SELECT id FROM runs WHERE name = ?", (name,))[0]
    starts = [(float(e[0]), int(e[1])) for e in events if e[2:4] == ["start", "flaky"]]
    for _, failed_at, next_at in _sql(
        db, "SELECT try, failed_at, next_at FROM step_tries WHERE run = ? ORDER BY try", (run_id,)
    ):
        if next_at is None:
            continue
        after = [(t, pid) for t, pid in starts if t > _at(failed_at)]
        if not after:
            continue
        t, pid = after[0]
        if t < _at(next_at) - 0.002:
            trial.backoff_skipped += 1
        if t - max(_at(next_at), opened.get(pid, 0.0)) > LATE_S:
            trial.backoff_late += 1
    wake = _sql(db, "SELECT wake_at FROM journal_prim WHERE run = ? AND key = 'nap'", (run_id,))
    woke = [(float(e[0]), int(e[1])) for e in events if e[2:4] == ["woke", "nap"]]
    if wake and woke:
        wake_at = _at(wake[0][0])
        first = next(((t, p) for t, p in woke), None)
        if first is not None and first[0] < wake_at - 0.002 and opened.get(first[1], 0) < wake_at:
            trial.sleep_early += 1
        if first is not None and first[0] - max(wake_at, opened.get(first[1], 0.0)) > LATE_S:
            trial.sleep_late += 1
    if trial.outcome == "completed":
        trial.wrong_value += sum(1 for e in events if e[2] == "got" and e[3] != value)
        spent = _sql(
            db,
            "SELECT sum(input_tokens) + sum(output_tokens), round(sum(cost), 6) "
            "FROM journal_prim WHERE run = ? AND status = 'done'",
            (run_id,),
        )
        if spent != [(3300, 0.03)]:
            trial.usage_wrong += 1
    if trial.outcome == "cancelled":
        # Starting the program again must be refused at open and run nothing.
        before = len(events)
        again = subprocess.run(
            [sys.executable, str(PIPELINE), str(db), str(log), name.split("-")[1], trial.mode],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if again.returncode == 0 or len(_events(log)) != before:
            trial.resumed_after_cancel += 1


COUNTERS = (
    "returned_then_rerun",
    "backoff_skipped",
    "sleep_early",
    "wrong_value",
    "usage_wrong",
    "resumed_after_cancel",
)


def main() -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", default="20261130")
    parser.add_argument("--no-write", action="store_true", help="Print; write no results file.")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    trials: list[Trial] = []
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        db = folder / "journal.db"
        for n in range(args.trials):
            mode = "sync" if n % 2 == 0 else "async"
            trials.append(run_trial(n, mode, n % 4 == 3, rng, db, folder))
    outcomes = Counter(t.outcome for t in trials)
    points = Counter(k for t in trials for k in t.kills)
    summary: dict[str, object] = {
        "trials": len(trials),
        "outcomes": dict(outcomes),
        "kills": sum(len(t.kills) for t in trials),
        **{c: sum(getattr(t, c) for t in trials) for c in COUNTERS},
        "backoff_late": sum(t.backoff_late for t in trials),
        "sleep_late": sum(t.sleep_late for t in trials),
        "unexpected_exits": [t.unexpected_exit for t in trials if t.unexpected_exit],
    }
    rows = [
        [mode, sum(t.mode == mode for t in trials)]
        + [sum(getattr(t, c) for t in trials if t.mode == mode) for c in COUNTERS]
        + [
            sum(t.backoff_late for t in trials if t.mode == mode),
            sum(t.sleep_late for t in trials if t.mode == mode),
        ]
        for mode in ("sync", "async")
    ]
    body = f"outcomes: {dict(outcomes)}; {summary['kills']} SIGKILLs\n\n"
    body += table(
        [
            "mode",
            "trials",
            "returned steps run again",
            "backoffs skipped",
            "sleeps woken early",
            "wrong values",
            "usage wrong",
            "resumed after cancel",
            f"backoffs late > {LATE_S}s",
            f"sleeps late > {LATE_S}s",
        ],
        rows,
    )
    body += "\n\nWhere the SIGKILLs landed:\n\n"
    body += table(["kill point", "kills"], [[k, v] for k, v in points.most_common()])
    command = f"python -m benchmarks.primitives_crash --trials {args.trials} --seed {args.seed}"
    if args.no_write:
        print(body)
    else:
        publish("primitives_crash", "The primitives under random SIGKILL", command, body)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
