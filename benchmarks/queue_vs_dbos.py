"""letitloop's Queue and DBOS's queue side by side, on the same machine and the same stores.

    python -m benchmarks.queue_vs_dbos [--enqueues 500] [--rounds 5] [--latency 30]
                                       [--kills 5] [--stores postgres,file] [--no-write]

Needs the bench extra (``pip install -e '.[bench]' -c constraints.txt``: DBOS 3.4.0).
Each system gets the same store: the same throwaway PostgreSQL server
(tests/pg_server.py, ``fsync=off``; letitloop in a schema of its own, DBOS in a
database of its own), and on one machine letitloop's journal file against DBOS's
SQLite system database (DBOS 3.x: ``system_database_url="sqlite:///…"``). Every
worker is a process of its own (``python benchmarks/queue_vs_dbos.py worker …``):
letitloop ``Queue("bench").worker(threads=1)``, DBOS ``DBOS.launch()`` with
``register_queue("bench", polling_interval_sec=0.1)`` (letitloop's idle worker
looks every 0.1 s too; DBOS's default is 1 s).

- **enqueue**: ``--enqueues`` enqueues from one thread of a producer process, no
  worker running (letitloop ``Queue.enqueue``; DBOS ``DBOSClient.enqueue``, its
  API for a producer outside the application), ``--rounds`` times: enqueues per
  second.
- **enqueue → start**: ``--latency`` times (the two systems in turn), one task
  enqueued while one idle worker of its system waits; the task's first line returns
  ``time.time()``; the latency is that minus the time just before the enqueue call
  (one clock: the same machine).
- **recovery after SIGKILL**: ``--kills`` times per mode, a task whose step hangs
  on its first run (it writes a marker, then sleeps) and returns at once on its
  second; its worker is SIGKILLed once the marker is there, and the time from the
  kill until the step starts again (its second marker's time) is measured.
  *Another worker*: a second worker process, started and idle before the kill,
  is the only one left. *Restart*: nothing else runs; a new worker process is
  started right after the kill, as a supervisor (``lil watch``, systemd) would
  start it: its start-up is part of the time. A mode that did not recover within
  ``--give-up`` seconds counts as not recovered (the run is then cancelled).
  Each DBOS worker process has an executor ID of its own (``DBOS__VMID``, as DBOS
  asks of processes that share a system database); the restarted one takes the
  killed one's, as a supervisor restarting that worker would. Before the kill both
  workers live ``--settle`` seconds: a step that starts again then counts as run
  again while its worker lived (``--shared-executor-id`` gives every DBOS worker
  DBOS's default ID, ``local``, to see what that does).

Bias: one 2-core machine shared with other work: medians of interleaved trials,
never single figures. DBOS is used as its documentation says, without its
Conductor service (which recovers a dead executor's workflows on another one).
The last line of stdout is the outcome as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

#: The application name DBOS's workers and its client share.
APP = "qbench"


# -- the tasks, the same for both: run in the worker processes ---------------------------


def hang_step(marks: str, key: str) -> int:
    """First run: a marker, then sleep until killed. Second run: a marker with its time."""
    first = Path(marks, f"{key}-first")
    if not first.exists():
        first.write_text(repr(time.time()))
        time.sleep(600)
    Path(marks, f"{key}-second.tmp").write_text(repr(time.time()))
    os.replace(Path(marks, f"{key}-second.tmp"), Path(marks, f"{key}-second"))
    return 1


def durability() -> Any:
    """The journal file's durability (``--durability``, passed to the workers by the
    environment): ``process`` (letitloop's default: a commit survives a killed process,
    fsync at checkpoints) or ``power`` (fsync at every commit, as DBOS's SQLite does)."""
    return os.environ.get("QBENCH_DURABILITY", "process")


def lil_queue(location: str, marks: str) -> Any:
    from letitloop import Queue, step

    q = Queue("bench", path=location, durability=durability())
    q.task(lambda: time.time(), name="stamp")
    q.task(lambda key: step("hang", hang_step, marks, key), name="hang")
    return q


def dbos_app(location: str, marks: str) -> Any:
    import logging

    from dbos import DBOS

    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(config={"name": APP, "system_database_url": location})

    @DBOS.workflow(name="stamp")
    def stamp() -> float:
        return time.time()

    @DBOS.step()
    def hang_once(key: str) -> int:
        return hang_step(marks, key)

    @DBOS.workflow(name="hang")
    def hang(key: str) -> int:
        return hang_once(key)

    return DBOS


def serve(system: str, location: str, marks: str, executor: str) -> None:
    """A worker process: ready once its marker ``ready-PID`` is there; until killed.
    ``executor`` is a DBOS worker's executor ID (``DBOS__VMID``)."""
    os.environ["DBOS__VMID"] = executor
    if system == "lil":
        lil_queue(location, marks).worker(threads=1).start()
    else:
        dbos = dbos_app(location, marks)
        dbos.launch()  # then the queue: DBOS keeps its settings in its system database
        dbos.register_queue("bench", polling_interval_sec=0.1)
    Path(marks, f"ready-{os.getpid()}").write_text("")
    while True:
        time.sleep(3600)


def produce(system: str, location: str, marks: str, n: str, rounds: str) -> None:
    """A producer process: ``rounds`` times ``n`` enqueues on a queue no worker takes from,
    by the application's own API; prints the enqueues per second of each round as JSON."""
    if system == "lil":
        from letitloop import Queue

        q = Queue("tput", path=location, durability=durability())
        q.task(lambda *a: None, name="nothing")
        enqueue = q.enqueue
    else:
        dbos = dbos_app(location, marks)
        dbos.launch()
        # Its poller looks once at the start (nothing there yet), then not for an hour.
        q = dbos.register_queue("tput", polling_interval_sec=3600)
        nothing = dbos.workflow(name="nothing")(lambda *a: None)

        def enqueue(name: str, *args: Any) -> Any:
            return q.enqueue(nothing, *args)

    rates = []
    for _ in range(int(rounds)):
        t = time.perf_counter()
        for i in range(int(n)):
            enqueue("nothing", i)
        rates.append(int(n) / (time.perf_counter() - t))
    print(json.dumps(rates))


# -- the coordinator ----------------------------------------------------------------------


class Store:
    """Where both systems keep their queue, and the producer of each."""

    def __init__(self, kind: str, folder: Path, shared: bool) -> None:
        self.kind, self.folder, self.shared = kind, folder, shared
        self.marks = str(folder / "marks")
        os.makedirs(self.marks, exist_ok=True)
        if kind == "postgres":
            sys.path.insert(0, str(ROOT / "tests"))
            import pg_server

            self.lil = pg_server.location()
            base, _, query = pg_server.server_url().partition("?")
            self.dbos = f"{base}_qbench_{os.getpid()}?{query}"
        else:
            self.lil = str(folder / "journal.db")
            self.dbos = f"sqlite:///{folder / 'dbos.sqlite'}"
        self.queue = lil_queue(self.lil, self.marks)
        from letitloop import Queue

        self.tput = Queue("tput", path=self.lil, durability=durability())  # no worker takes it
        self.tput.task(lambda *a: None, name="nothing")
        self.client: Any = None

    def location(self, system: str) -> str:
        return self.lil if system == "lil" else self.dbos

    def start(self, system: str, executor: str = "w1") -> tuple[subprocess.Popen[bytes], float]:
        """A worker process, once ready: it, and the seconds it took to be ready. A DBOS
        worker runs as executor ``executor`` (``local`` for all with --shared-executor-id)."""
        t = time.time()
        executor = "local" if self.shared else executor
        proc = subprocess.Popen(
            [sys.executable, __file__, "worker", system, self.location(system), self.marks,
             executor],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        ready = Path(self.marks, f"ready-{proc.pid}")
        until(lambda: ready.exists() or proc.poll() is not None, 60, "a worker ready")
        if proc.poll() is not None:
            raise SystemExit(f"the {system} worker exited with {proc.returncode}")
        return proc, time.time() - t

    def dbos_client(self) -> Any:
        if self.client is None:
            from dbos import DBOSClient

            self.client = DBOSClient(system_database_url=self.dbos, application_name=APP)
        return self.client

    def enqueue(self, system: str, task: str, *args: Any, queue: str = "bench") -> Any:
        if system == "lil":
            return (self.queue if queue == "bench" else self.tput).enqueue(task, *args)
        options = {"queue_name": queue, "workflow_name": task}
        return self.dbos_client().enqueue(options, *args)

    def result(self, system: str, handle: Any, timeout: float = 60) -> Any:
        if system == "lil":
            return handle.result(timeout=timeout)
        return handle.get_result(polling_interval_sec=0.005)

    def cancel(self, system: str, handle: Any) -> None:
        if system == "lil":
            handle.cancel()
        else:
            self.dbos_client().cancel_workflow(handle.get_workflow_id())

    def close(self) -> None:
        if self.client is not None:
            self.client.destroy()
        if self.kind == "postgres":
            import psycopg

            base, _, query = self.dbos.partition("?")
            admin = base.rsplit("/", 1)[0] + "/postgres?" + query
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{base.rsplit("/", 1)[1]}" WITH (FORCE)')


def until(done: Any, within: float, what: str) -> bool:
    deadline = time.monotonic() + within
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def app_rates(store: Store, system: str, n: int, rounds: int) -> list[float]:
    """Enqueues per second by the application's own API, in a producer process."""
    done = subprocess.run(
        [sys.executable, __file__, "produce", system, store.location(system), store.marks,
         str(n), str(rounds)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rates: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return rates


def enqueue_rate(store: Store, system: str, n: int) -> float:
    t = time.perf_counter()
    for i in range(n):
        store.enqueue(system, "nothing", i, queue="tput")
    return n / (time.perf_counter() - t)


def latencies(store: Store, systems: tuple[str, ...], n: int) -> dict[str, list[float]]:
    """``n`` enqueue → start latencies of each system, interleaved, one idle worker each."""
    workers = [store.start(s)[0] for s in systems]
    try:
        out: dict[str, list[float]] = {s: [] for s in systems}
        for s in systems:  # the first one warms up
            store.result(s, store.enqueue(s, "stamp"))
        for _ in range(n):
            for s in systems:
                t = time.time()
                started = store.result(s, store.enqueue(s, "stamp"))
                out[s].append(float(started) - t)
        return out
    finally:
        for w in workers:
            kill(w)


def recovery(
    store: Store, system: str, mode: str, key: str, give_up: float, settle: float
) -> dict[str, Any]:
    """One kill: the seconds from the SIGKILL until the hung step started again (None: not
    within ``give_up``), and how long the restarted worker took to be ready."""
    first, second = Path(store.marks, f"{key}-first"), Path(store.marks, f"{key}-second")
    holder, _ = store.start(system)
    others = []
    started = None
    try:
        handle = store.enqueue(system, "hang", key)
        if not until(first.exists, 60, "the step hung"):
            raise SystemExit(f"{system}: the hang step never started")
        duplicate = False
        if mode == "other":
            others.append(store.start(system, "w2")[0])
            time.sleep(settle)  # both alive: the step must not start again yet
            duplicate = second.exists()
        t = time.time()
        os.kill(holder.pid, signal.SIGKILL)
        if mode == "restart":  # the same worker slot started again: its executor ID
            proc, started = store.start(system, "w1")
            others.append(proc)
        back = not duplicate and until(second.exists, give_up, "the step again")
        took = float(second.read_text()) - t if back else None
        if not back and not duplicate:
            store.cancel(system, handle)
        else:
            until(lambda: second.exists(), give_up, "the duplicate's end")
        return {"seconds": took, "ready_s": started, "duplicate": duplicate}
    finally:
        kill(holder)
        for proc in others:
            kill(proc)


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "letitloop": version("letitloop"),
        "dbos": version("dbos"),
        "python": sys.version.split()[0],
    }
    systems = ("lil", "dbos")
    for kind in args.stores.split(","):
        folder = Path(tempfile.mkdtemp(prefix=f"qbench-{kind}-"))
        store = Store(kind, folder, args.shared_executor_id)
        try:
            found: dict[str, dict[str, Any]] = {s: {} for s in systems}
            for s in systems:  # each makes its tables first (DBOS's client makes none)
                kill(store.start(s)[0])
            rates: dict[str, list[float]] = {s: [] for s in systems}
            for _ in range(args.rounds):  # interleaved
                for s in systems:
                    rates[s] += app_rates(store, s, args.enqueues, 1)
            client = [enqueue_rate(store, "dbos", args.enqueues) for _ in range(args.rounds)]
            found["dbos"]["client_enqueues_per_s"] = median(client)
            waits = latencies(store, systems, args.latency)
            for s in systems:
                found[s]["enqueues_per_s"] = median(rates[s])
                found[s]["enqueue_to_start_s"] = median(waits[s])
            for mode in ("other", "restart"):
                times: dict[str, list[Any]] = {s: [] for s in systems}
                for i in range(args.kills):
                    for s in systems:
                        times[s].append(
                            recovery(store, s, mode, f"{s}-{mode}-{i}", args.give_up, args.settle)
                        )
                for s in systems:
                    done = [t["seconds"] for t in times[s] if t["seconds"] is not None]
                    found[s][f"recovery_{mode}_s"] = median(done)
                    found[s][f"recovery_{mode}_recovered"] = f"{len(done)}/{len(times[s])}"
                    if mode == "other":
                        twice = sum(t["duplicate"] for t in times[s])
                        found[s]["ran_again_while_holder_lived"] = f"{twice}/{len(times[s])}"
                    ready = [t["ready_s"] for t in times[s] if t["ready_s"] is not None]
                    if ready:
                        found[s]["worker_ready_s"] = median(ready)
            out[kind] = found
        finally:
            store.close()
            shutil.rmtree(folder, ignore_errors=True)
    return out


def shown(measure: str, found: dict[str, Any]) -> str:
    """A figure as the table shows it: per second whole, seconds in ms, none as "-"."""
    value = found.get(measure)
    if value is None:
        return "not recovered" if measure.startswith("recovery_") else "-"
    if measure.endswith("_per_s"):
        return f"{value:,.0f}"
    if measure.endswith("_s"):
        return f"{value * 1000:,.0f} ms"
    return str(value)


def lines(found: dict[str, Any]) -> list[list[str]]:
    rows = []
    for kind in ("postgres", "file"):
        if kind not in found:
            continue
        f = found[kind]
        store = "PostgreSQL" if kind == "postgres" else "one machine: file / SQLite"
        for measure, label in (
            ("enqueues_per_s", "enqueues per second (one thread, the app's own API)"),
            ("client_enqueues_per_s", "  by DBOSClient (a producer outside the app)"),
            ("enqueue_to_start_s", "enqueue → start"),
            ("recovery_other_s", "SIGKILL → step again, another worker idle"),
            ("recovery_other_recovered", "  recovered"),
            ("ran_again_while_holder_lived", "  step started again while its worker lived"),
            ("recovery_restart_s", "SIGKILL → step again, worker restarted"),
            ("recovery_restart_recovered", "  recovered"),
            ("worker_ready_s", "  a restarted worker ready after"),
        ):
            rows.append([store, label, shown(measure, f["lil"]), shown(measure, f["dbos"])])
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        serve(*sys.argv[2:6])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "produce":
        produce(*sys.argv[2:7])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--enqueues", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=int, default=30)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--give-up", type=float, default=10.0)
    parser.add_argument(
        "--settle", type=float, default=2.0, help="seconds both workers live before the kill"
    )
    parser.add_argument("--stores", default="postgres,file")
    parser.add_argument(
        "--shared-executor-id",
        action="store_true",
        help="every DBOS worker as executor 'local' (DBOS's default) instead of one ID each",
    )
    parser.add_argument(
        "--durability",
        choices=["process", "power"],
        default="process",
        help="the journal file's Queue(durability=...) (PostgreSQL's is the server's)",
    )
    parser.add_argument("--name", default="queue_vs_dbos", help="benchmarks/results/NAME.md")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    os.environ["QBENCH_DURABILITY"] = args.durability
    found = run(args)
    found["durability"] = args.durability
    from benchmarks._report import environment

    print(f"{environment()}, DBOS {found['dbos']}, journal file durability={args.durability}")
    header = ["store", "measure", f"letitloop {found['letitloop']}", f"DBOS {found['dbos']}"]
    rows = lines(found)
    width = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, width, strict=True)))
    if not args.no_write:
        from benchmarks._report import publish, table

        publish(
            args.name,
            "letitloop's Queue and DBOS's queue, side by side",
            "python -m benchmarks.queue_vs_dbos " + " ".join(sys.argv[1:]),
            table(header, rows),
        )
    print(json.dumps(found))


if __name__ == "__main__":
    main()
