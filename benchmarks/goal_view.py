"""What the ``journal_rows`` browsing view costs as goals multiply.

``journal_rows`` (migrations/0004_views.sql) unions every goal's journal table;
letitloop rebuilds it when a goal is added, and every connection parses its
SQL when it opens the file. This measures, side by side in one run, for N
goals in a file: the time to add one more goal and to open the file (a
``Store``, what every ``Journal()`` open starts with), for

- "no view": the rebuild switched off (the cost of the goal tables alone);
- "capped": what letitloop does (the view covers at most VIEW_MAX_GOALS goals,
  then stays an empty placeholder);
- "uncapped": the view rebuilt over every goal, however many.

    python benchmarks/goal_view.py
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import median_of, ms, publish, table
from letitloop.stores.sqlite import goals as store_module  # where ensure_goal reads both from
from letitloop.stores.sqlite.store import Store

#: Up to 450: an uncapped view of 500+ goals fails (SQLite allows 500 terms per
#: compound SELECT), which is one more reason for the cap.
SIZES = (50, 200, 450)
REPEATS = 7


def _config(name: str) -> Callable[[], None]:
    """Install a configuration; returns the function that restores the default."""
    original_fn = store_module.refresh_journal_rows
    original_max = store_module.VIEW_MAX_GOALS
    if name == "no view":
        store_module.refresh_journal_rows = lambda conn: None
    elif name == "uncapped":
        store_module.VIEW_MAX_GOALS = 10**9

    def restore() -> None:
        store_module.refresh_journal_rows = original_fn
        store_module.VIEW_MAX_GOALS = original_max

    return restore


def measure(name: str, folder: Path) -> dict[int, tuple[float, float]]:
    restore = _config(name)
    out: dict[int, tuple[float, float]] = {}
    try:
        path = folder / f"{name.replace(' ', '_')}.db"
        s = Store(path)
        made = 0
        for size in SIZES:
            with s.write() as c:
                while made < size:
                    s.ensure_goal(c, f"goal{made}", time.time())
                    made += 1

            def add_one() -> float:
                nonlocal made
                t = time.perf_counter()
                with s.write() as c:
                    s.ensure_goal(c, f"goal{made}", time.time())
                made += 1
                return time.perf_counter() - t

            def open_once() -> float:
                t = time.perf_counter()
                Store(path).close()
                return time.perf_counter() - t

            out[size] = (median_of(REPEATS, add_one), median_of(REPEATS, open_once))
        s.close()
    finally:
        restore()
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        results = {name: measure(name, Path(tmp)) for name in ("no view", "capped", "uncapped")}
    rows = []
    for size in SIZES:
        for name, by_size in results.items():
            add, open_ = by_size[size]
            rows.append([f"{size:,}", name, ms(add), ms(open_)])
    body = (
        f"Median of {REPEATS} repeats; 'goals' is how many the file holds when measured "
        f"(VIEW_MAX_GOALS = {store_module.VIEW_MAX_GOALS}).\n\n"
        + table(["goals", "view", "add one goal", "open the file (Store)"], rows)
    )
    publish(
        "goal_view", "The cost of the journal_rows view", "python benchmarks/goal_view.py", body
    )
    print(f"(sqlite3 module {sqlite3.sqlite_version})")


if __name__ == "__main__":
    main()
