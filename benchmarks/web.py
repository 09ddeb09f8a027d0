"""``lil ui``'s pages on large journals: a run of 10,000 steps, a journal of 100,000 runs.

    python benchmarks/web.py [--steps 10000] [--runs 100000] [--repeats 5]

Each figure is the median time of one GET through the real app (Starlette's TestClient,
in process: no network, no browser layout) from the request to the last byte, the
journal opened read-only for each request as ``lil ui`` does. The 100,000 runs are 1,000
real runs of 3 steps (made by ``Journal``) copied 100 times with SQL, ids changed: the
copies are rows like the real ones, made quickly. What it does not show: the browser's
own time to lay the page out, a cold page cache (the file was just written).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import environment, ms, table
from letitloop import Journal


def long_run(db: Path, steps: int) -> str:
    with Journal("long", path=db) as j:
        for i in range(steps):
            j.step(f"step-{i}", lambda i=i: {"i": i, "text": f"result {i}", "ok": True})
        return j.run_id


def many_runs(db: Path, runs: int) -> None:
    """``runs`` runs of goal ``many``, 3 steps each: 1,000 made by Journal, the rest copies."""
    real = min(runs, 1_000)
    for i in range(real):
        with Journal("many", path=db, run=f"run-{i}") as j:
            for k in range(3):
                j.step(f"s{k}", lambda k=k: k)
    conn = sqlite3.connect(db)
    try:
        (table_name,) = conn.execute(
            "SELECT journal_table FROM goals WHERE goal = 'many'"
        ).fetchone()
        with_run = [
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if name != "runs"
            and any(c[1] == "run" for c in conn.execute(f'PRAGMA table_info("{name}")'))
            and (name == table_name or not name.startswith("j_"))
        ]
        originals = [r for (r,) in conn.execute("SELECT id FROM runs WHERE goal = 'many'")]
        nums = [n for (n,) in conn.execute("SELECT num FROM runs WHERE goal = 'many'")]
        (base,) = conn.execute("SELECT max(num) FROM runs").fetchone()
        copies = (runs - real) // real
        with conn:
            for n in range(1, copies + 1):
                # a new id of the same shape: the ULID's time part kept, its tail changed;
                # a new key (runs.num, what a goal's compact rows name their run by)
                new = f"substr(id, 1, 20) || printf('%06d', {n})"
                cols = [c[1] for c in conn.execute('PRAGMA table_info("runs")')]
                picked = ", ".join(
                    new
                    if c == "id"
                    else f"name || '-{n}'"
                    if c == "name"
                    else f"num + {n * base}"
                    if c == "num"
                    else c
                    for c in cols
                )
                conn.execute(
                    f"INSERT INTO runs ({', '.join(cols)}) SELECT {picked} FROM runs "
                    f"WHERE id IN ({', '.join('?' * len(originals))})",
                    originals,
                )
                for t in with_run:
                    info = list(conn.execute(f'PRAGMA table_info("{t}")'))
                    tcols = [c[1] for c in info]
                    by_num = any(c[1] == "run" and c[2].upper() == "INTEGER" for c in info)
                    shifted = (
                        f"run + {n * base}"
                        if by_num
                        else f"substr(run, 1, 20) || printf('%06d', {n})"
                    )
                    tpicked = ", ".join(shifted if c == "run" else c for c in tcols)
                    keys = nums if by_num else originals
                    conn.execute(
                        f'INSERT INTO "{t}" ({", ".join(tcols)}) SELECT {tpicked} FROM "{t}" '
                        f"WHERE run IN ({', '.join('?' * len(keys))})",
                        keys,
                    )
    finally:
        conn.close()


def timed(client: object, url: str, repeats: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(repeats):
        t = time.perf_counter()
        r = client.get(url)  # type: ignore[attr-defined]
        times.append(time.perf_counter() - t)
        assert r.status_code in (200, 204), (url, r.status_code, r.text[:300])
        size = len(r.content)
    return statistics.median(times), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from starlette.testclient import TestClient

    from letitloop.inspection import open_inspector
    from letitloop.web import create_app, standalone_run

    print(f"lil ui pages: {environment()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "long.db"
        run_id = long_run(db, args.steps)
        c = TestClient(create_app(db), base_url="http://127.0.0.1")
        stamp = c.get(f"/runs/{run_id}/live?page=1").headers["x-lil-stamp"]
        for label, url in (
            (f"run of {args.steps:,} steps, page 1", f"/runs/{run_id}"),
            (f"run of {args.steps:,} steps, last page", f"/runs/{run_id}?page=1000000"),
            (
                f"run of {args.steps:,} steps, live check (unchanged: 204)",
                f"/runs/{run_id}/live?page=1&stamp={stamp}",
            ),
        ):
            took, size = timed(c, url, args.repeats)
            rows.append((label, ms(took), f"{size / 1024:,.0f} KiB"))
        journal = open_inspector(db)
        try:
            t = time.perf_counter()
            html = standalone_run(journal, run_id)
            rows.append(
                (
                    f"lil export --format html, {args.steps:,} steps whole",
                    ms(time.perf_counter() - t),
                    f"{len(html) / 1024:,.0f} KiB",
                )
            )
        finally:
            journal.close()

        db = Path(tmp) / "many.db"
        t = time.perf_counter()
        many_runs(db, args.runs)
        made = time.perf_counter() - t
        c = TestClient(create_app(db), base_url="http://127.0.0.1")
        for label, url in (
            (f"runs page of {args.runs:,} runs, first page", "/"),
            (
                f"runs page of {args.runs:,} runs, page at offset {args.runs - 50:,}",
                f"/?offset={args.runs - 50}",
            ),
            (f"runs page of {args.runs:,} runs, goal filter", "/?goal=many"),
            (
                f"runs page of {args.runs:,} runs, state filter (crashed: none here)",
                "/?status=crashed",
            ),
            (f"runs page of {args.runs:,} runs, name glob", "/?name=run-99*"),
        ):
            took, size = timed(c, url, args.repeats)
            rows.append((label, ms(took), f"{size / 1024:,.0f} KiB"))
    print(table(["page", f"median of {args.repeats}", "size"], rows))
    print(f"(the journal of {args.runs:,} runs took {made:.1f} s to make)")


if __name__ == "__main__":
    main()
