"""``lil worker``: the worker processes of a work queue (``letitloop/queueing/queue_worker.py``)."""

from __future__ import annotations

from typing import Any

import click

from .params import db_option, json_flags, open_journal


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


@click.command()
@click.argument("queue_name", metavar="[QUEUE]", required=False)
@click.option(
    "--module",
    metavar="MODULE",
    help="Import MODULE (as lil worker does) to show the limits its queues declare.",
)
@json_flags
@db_option
@click.pass_context
def queues(
    ctx: click.Context, queue_name: str | None, module: str | None, as_json: bool, as_jsonl: bool
) -> None:
    """Each work queue of the journal: its entries per state, the longest wait, its workers.

    QUEUED entries are due and wait for a worker, DELAYED ones are not due
    yet, RUNNING ones are held by a live worker (the concurrency in use),
    CRASHED ones were held by a worker that died (the next look of any worker
    takes them over). OLDEST WAIT is how long the due entry that waited
    longest has waited; WORKERS the pid@host of each process holding a
    running entry. A queue's limits live in the programs that declare it,
    not in the journal: --module MODULE imports one to show them. Reads the
    journal only.

    \b
    Examples:
      lil queues
      lil queues emails --module app.tasks --json
      lil runs --queue emails --status queued
    """
    from ..inspection.queue_listing import queue_stats
    from ..runtext import render
    from ..runtext.queues import queue_lines, queue_records

    limits: dict[str, Any] = {}
    if module is not None:
        from ..queueing.queues import declared, declared_names

        _import(module)
        for name in declared_names():
            q = declared(name)
            if q is not None:
                limits[name] = q.limits
    journal = open_journal(ctx)
    try:
        stats = queue_stats(journal, queue_name)
    finally:
        journal.close()
    records = queue_records(stats)
    if module is not None:
        for r in records:
            lim = limits.get(r["queue"])
            r["concurrency"] = None if lim is None else lim.concurrency
            r["rate_limit"] = None if lim is None or lim.rate is None else list(lim.rate)
    if as_json or as_jsonl:
        render.echo_jsonl(records) if as_jsonl else render.echo_json(records)
        return
    lines = queue_lines(stats)
    if module is not None and stats:
        for r in records:
            if r["queue"] not in limits:
                lines.append(f"{r['queue']}: {module} declares no such queue")
                continue
            rate = r["rate_limit"]
            lines.append(
                f"{r['queue']}: concurrency {r['concurrency'] or 'unlimited'}, rate limit "
                + ("none" if rate is None else f"{rate[0]} per {rate[1]:g} s")
                + f" ({r['running']} running now)"
            )
    render.echo(lines)


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
