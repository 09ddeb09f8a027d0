"""A scheduled report, as docs/schedules.md writes one, for the tests' schedulers.

``lil schedules run tests/schedule_jobs.py`` runs it. Its schedule comes from
the environment (``JOBS_CRON``, ``JOBS_TZ``, ``JOBS_CATCH_UP``,
``JOBS_WINDOW_S``, ``JOBS_OVERLAP``); each step function appends a line
``<step> <tick>`` to ``JOBS_SIDE`` when it is called (so a test counts the
calls from outside), and ``build`` waits, while ``JOBS_GATE`` names a file
that does not exist, for it to appear (a run a test kills mid-step).
"""

import os
import time
from datetime import datetime

from letitloop import durable, schedule, step

WINDOW = os.environ.get("JOBS_WINDOW_S")


def called(what: str, tick: str) -> None:
    with open(os.environ["JOBS_SIDE"], "a", encoding="utf-8") as side:
        side.write(f"{what} {tick}\n")  # one short append: whole lines, whatever the writers


def fetch(tick: str) -> dict[str, str]:
    called("fetch", tick)
    return {"tick": tick, "rows": "42"}


def build(data: dict[str, str]) -> str:
    called("build", data["tick"])
    gate = os.environ.get("JOBS_GATE")
    while gate and not os.path.exists(gate):
        time.sleep(0.02)
    return f"report of {data['tick']}: {data['rows']} rows"


@schedule(
    os.environ.get("JOBS_CRON", "* * * * *"),
    tz=os.environ.get("JOBS_TZ", "UTC"),
    catch_up=os.environ.get("JOBS_CATCH_UP", "latest"),  # type: ignore[arg-type]
    window=float(WINDOW) if WINDOW else None,
    overlap=os.environ.get("JOBS_OVERLAP", "skip"),  # type: ignore[arg-type]
)
@durable(goal_id="report")
def report(tick: datetime) -> str:
    data = step("fetch", fetch, tick.isoformat())
    return step("build", build, data)
