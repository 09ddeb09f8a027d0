"""Durable background work in a Starlette app (FastAPI: the same lines, below).

    pip install -e '.[web]' uvicorn   # in your clone
    uvicorn starlette_app:app --workers 2
    curl -X POST -H 'Idempotency-Key: order-1' localhost:8000/reports   # {"id": "order-1"}
    curl localhost:8000/jobs/runs/order-1                                # status, steps, result

Each report is a run of the queue ``reports`` in the journal file
(.letitloop/journal.db), served by a worker inside each server process. Kill the
process running it (kill -9): another one takes the run over within a tenth of a
second and finishes it, each finished part replayed, not made again. Stop the
server (Ctrl-C, SIGTERM): the part in progress finishes, the run goes back to the
queue, and the next start of the server finishes it. tests/test_web_background.py
runs this file under uvicorn.
"""

import os
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from letitloop import Queue, step
from letitloop.integrations.starlette import Background, start

reports = Queue("reports")


def render_part(i: int) -> int:
    print(f"part {i} in process {os.getpid()}", flush=True)
    time.sleep(0.4)  # your slow work here: a query, a model call, a PDF
    return i * i


@reports.task
def build_report(parts: int) -> dict[str, int]:
    return {"total": sum(step(f"part{i}", render_part, i) for i in range(parts))}


background = Background(reports)


async def create_report(request: Request) -> JSONResponse:
    run = start(request, build_report, 5)  # the Idempotency-Key header, if sent, names it
    return JSONResponse({"id": run}, status_code=202)


app = Starlette(
    routes=[Route("/reports", create_report, methods=["POST"]), *background.routes("/jobs")],
    lifespan=background.lifespan,
)

# FastAPI, the same lines:
#
#     app = FastAPI(lifespan=background.lifespan)
#     app.router.routes.extend(background.routes("/jobs"))
#
#     @app.post("/reports", status_code=202)
#     def create_report(request: Request) -> dict[str, str]:
#         return {"id": start(request, build_report, 5)}
