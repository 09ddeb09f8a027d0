"""``lil worker``: the worker processes of a work queue (``letitloop/queueing/queue_worker.py``)."""

from __future__ import annotations

import click


@click.command()
@click.argument("module", metavar="MODULE")
@click.option("--queue", "queue_name", required=True, help="The queue's name, as Queue(NAME).")
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes (each started again when it dies).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs at once in each process.",
)
def worker(module: str, queue_name: str, processes: int, threads: int) -> None:
    """Run the workers of queue NAME declared in MODULE, until SIGTERM or Ctrl-C.

    MODULE (a dotted module importable from here, or a .py file) is imported
    once: it declares the queue (Queue(NAME, ...)) and registers its tasks
    (@queue.task), so entries find their functions by their registered names.
    Each process runs THREADS runs at once, within the queue's concurrency and
    rate limit; a dead worker's runs are taken over by another worker within
    about a tenth of a second. SIGTERM drains: each run stops after the step
    in flight and goes back to the queue, unmarked; then the command exits 0.

    \b
    Examples:
      lil worker app.tasks --queue emails --processes 2 --threads 2
      lil watch -m letitloop worker app.tasks --queue emails
    """
    from ..queueing.queues import declared, declared_names

    _import(module)
    queue = declared(queue_name)
    if queue is None:
        found = ", ".join(declared_names()) or "none"
        raise click.ClickException(
            f"{module} declares no queue named {queue_name!r} (declared: {found}); declare it "
            f"there with Queue({queue_name!r}, ...) or pass the right --queue"
        )
    raise SystemExit(queue.worker(threads=threads, processes=processes).run())


def _import(module: str) -> None:
    """Import MODULE: a dotted name from the current folder, or a .py file by its stem."""
    import importlib
    import importlib.util
    import os
    import sys

    if module.endswith(".py") or os.sep in module:
        if not os.path.isfile(module):
            raise click.ClickException(f"expected a Python file at {module!r}, found none")
        folder = os.path.dirname(os.path.abspath(module))
        name = os.path.splitext(os.path.basename(module))[0]
    else:
        folder, name = os.getcwd(), module
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        importlib.import_module(name)
    except ImportError as exc:
        raise click.ClickException(
            f"cannot import {module!r} ({exc}); run lil worker from the folder that holds it, "
            f"or give its .py file"
        ) from None
