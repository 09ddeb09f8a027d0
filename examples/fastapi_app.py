"""Durable background work in a FastAPI app: reports that survive a worker's death.

    pip install -e '.[fastapi]' uvicorn gunicorn   # in your clone
    gunicorn fastapi_app:app -k uvicorn.workers.UvicornWorker -w 2 --preload
    curl -X POST -H 'Idempotency-Key: order-1' localhost:8000/reports   # {"id": "order-1"}
    curl localhost:8000/jobs/runs/order-1                                # status, steps, result
    curl -N localhost:8000/jobs/runs/order-1/events                      # its steps, live

Each report is a run of the queue ``reports`` in the journal file
(.letitloop/journal.db, or LETITLOOP_DB: a file or postgresql://), served by a
worker inside each server process. Kill the process running it (kill -9): another
one takes the run over within a tenth of a second and finishes it, each finished
part replayed, not made again. Stop the server (SIGTERM): the part in progress
finishes, the run goes back to the queue, and the next start of the server finishes
it. tests/test_web_fastapi.py runs this file under gunicorn.
"""

import os
import time

from fastapi import FastAPI

from letitloop import Queue, step
from letitloop.integrations.fastapi import Background, DurableTasks

reports = Queue("reports")


def render_part(i: int) -> int:
    print(f"part {i} in process {os.getpid()}", flush=True)
    time.sleep(0.4)  # your slow work here: a query, a model call, a PDF
    return i * i


@reports.task
def build_report(parts: int) -> dict[str, int]:
    return {"total": sum(step(f"part{i}", render_part, i) for i in range(parts))}


background = Background(reports)
app = FastAPI(lifespan=background.lifespan)
app.include_router(background.router(), prefix="/jobs")


@app.post("/reports", status_code=202)
async def create_report(tasks: DurableTasks) -> dict[str, str]:
    return {"id": await tasks.async_start(build_report, 5)}  # Idempotency-Key names it


@app.post("/reports/sync", status_code=202)
def create_report_in_a_thread(tasks: DurableTasks) -> dict[str, str]:
    return {"id": tasks.add_task(build_report, 5)}  # as BackgroundTasks.add_task, in a def
