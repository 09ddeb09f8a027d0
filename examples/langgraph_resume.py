"""A LangGraph graph killed with SIGKILL half-way through, then resumed: what runs again?

Offline and deterministic: the "model" is a hash of the prompt, no API key.

    python examples/langgraph_resume.py [--crash] [--db PATH] [--ledger PATH]

A 4-node StateGraph (plan -> research -> write -> review) checkpoints into the
letitloop journal file through ``LetItLoopCheckpointSaver``; each node is a
``durable_node`` whose model calls are ``step()``s. Every node entry and every
real model call is appended to a ledger file, so you can see what ran in which
process.

Without ``--crash`` the graph runs once, in a child process. With ``--crash``
that child is killed with a real SIGKILL from outside once node 2 (research)
has finished and node 3 (write) has made two of its three model calls, and a
second child resumes the thread with ``invoke(None, config)``:

- plan and research never run again (their checkpoint was committed);
- write runs again, but its two finished calls replay from the journal and
  only the interrupted third call reaches the model;
- review runs once, in the second process.

Needs ``pip install -e '.[langgraph]'``, run from a checkout of this repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, TypedDict

THREAD = {"configurable": {"thread_id": "article-1"}}
KILL_POINT = "ready-to-be-killed"


class Article(TypedDict, total=False):
    topic: str
    outline: str
    notes: list[str]
    draft: str
    review: str


def fake_model(prompt: str) -> str:
    """A deterministic stand-in for an LLM call."""
    return f"[{prompt[:32]} #{hashlib.sha256(prompt.encode()).hexdigest()[:8]}]"


def record(kind: str, **fields: Any) -> None:
    """Append one line to the ledger: a node entered, or a model call really made."""
    line = json.dumps({"phase": os.environ["EXAMPLE_PHASE"], "pid": os.getpid(), kind: fields})
    with open(os.environ["EXAMPLE_LEDGER"], "a", encoding="utf-8") as f:
        f.write(line + "\n")


def call_model(node: str, call: str, prompt: str) -> str:
    record("call", node=node, call=call)
    return fake_model(prompt)


def build_graph(db: Path) -> Any:
    from langgraph.graph import END, START, StateGraph

    from letitloop import step
    from letitloop.adapters.langgraph import LetItLoopCheckpointSaver, durable_node

    @durable_node
    def plan(state: Article) -> Article:
        record("node", node="plan")
        return {"outline": step("outline", call_model, "plan", "outline", state["topic"])}

    @durable_node
    def research(state: Article) -> Article:
        record("node", node="research")
        notes = [
            step(f"search:{q}", call_model, "research", f"search:{q}", f"{state['outline']} {q}")
            for q in ("history", "practice")
        ]
        return {"notes": notes}

    @durable_node
    def write(state: Article) -> Article:
        record("node", node="write")
        parts = []
        for section in ("intro", "body", "conclusion"):
            if section == "conclusion" and os.environ["EXAMPLE_PHASE"] == "first":
                # Two calls are journaled; wait here for the parent's SIGKILL.
                print(KILL_POINT, flush=True)
                signal.pause()
            prompt = f"{section} from {' '.join(state['notes'])}"
            parts.append(step(f"draft:{section}", call_model, "write", f"draft:{section}", prompt))
        return {"draft": "\n".join(parts)}

    @durable_node
    def review(state: Article) -> Article:
        record("node", node="review")
        return {"review": step("review", call_model, "review", "review", state["draft"])}

    graph = StateGraph(Article)
    for name, fn in (("plan", plan), ("research", research), ("write", write), ("review", review)):
        graph.add_node(name, fn)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "research")
    graph.add_edge("research", "write")
    graph.add_edge("write", "review")
    graph.add_edge("review", END)
    return graph.compile(checkpointer=LetItLoopCheckpointSaver(db))


def run_phase(phase: str, db: Path) -> None:
    """In a child process: run the graph from the start, or resume the thread."""
    app = build_graph(db)
    # durability="sync": each superstep's checkpoint is committed before the
    # next one starts, so a finished node is never lost to a kill and the list
    # of nodes below is the same on every run. With LangGraph's default
    # "async" (or "exit"), a node whose checkpoint was lost runs again, and its
    # finished calls replay just the same (docs/langgraph.md, per mode).
    if phase in ("first", "once"):
        app.invoke({"topic": "durable execution"}, THREAD, durability="sync")
    else:
        final = app.invoke(None, THREAD, durability="sync")
        print(json.dumps({"final": final}), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crash", action="store_true", help="SIGKILL the graph inside node 3")
    parser.add_argument("--db", type=Path, help="journal file (default: a temporary one)")
    parser.add_argument("--ledger", type=Path, help="ledger file (default: beside the journal)")
    parser.add_argument("--phase", choices=["first", "resume", "once"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        run_phase(args.phase, args.db)
        return 0
    show = demonstrate if args.crash else run_once
    if args.db is not None:
        return show(args.db, args.ledger or args.db.with_name("ledger.jsonl"))
    # No --db: a temporary folder, removed at the end whatever happens.
    with tempfile.TemporaryDirectory(prefix="letitloop-langgraph-") as folder:
        print("(a temporary folder, removed at the end; pass --db PATH to keep the journal)")
        db = Path(folder) / "journal.db"
        return show(db, args.ledger or db.with_name("ledger.jsonl"))


def child(phase: str, db: Path, ledger: Path) -> subprocess.Popen[str]:
    """This script in a child process, running ``phase`` of the graph on ``db``."""
    env = {**os.environ, "EXAMPLE_PHASE": phase, "EXAMPLE_LEDGER": str(ledger)}
    argv = [sys.executable, "-u", __file__, "--db", str(db), "--phase", phase]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)


def run_once(db: Path, ledger: Path) -> int:
    """Run the graph in a child, to the end."""
    print(f"journal: {db}\nledger:  {ledger}\n")
    once = child("once", db, ledger)
    once.communicate(timeout=120)
    print(f"process 1 (pid {once.pid}): exit {once.returncode}\n")
    report(db, ledger, [("once", "process 1")])
    print("\nrun it with --crash to see it killed in node 3 and resumed")
    return 0 if once.returncode == 0 else 1


def demonstrate(db: Path, ledger: Path) -> int:
    """Run the graph in a child, SIGKILL it inside node 3, resume it in a second child."""
    print(f"journal: {db}\nledger:  {ledger}\n")
    first = child("first", db, ledger)
    assert first.stdout is not None
    for line in first.stdout:
        if line.strip() == KILL_POINT:
            first.send_signal(signal.SIGKILL)
            break
    first.wait(timeout=60)
    killed = first.returncode == -signal.SIGKILL
    print(f"process 1 (pid {first.pid}): exit {first.returncode}{' (SIGKILL)' if killed else ''}")

    second = child("resume", db, ledger)
    out, _ = second.communicate(timeout=120)
    print(f"process 2 (pid {second.pid}): exit {second.returncode}\n")
    report(db, ledger, [("first", "process 1"), ("resume", "process 2 (invoke(None, config))")])
    final = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    if final:
        print("\nfinal state keys:", sorted(final[-1]["final"]))
    ok = killed and second.returncode == 0
    return 0 if ok else 1


def report(db: Path, ledger: Path, phases: list[tuple[str, str]]) -> None:
    """Print what ran in each process (the ledger), then the journal read from outside."""
    lines = [json.loads(x) for x in ledger.read_text(encoding="utf-8").splitlines()]
    for phase, title in phases:
        print(f"{title}:")
        for entry in lines:
            if entry["phase"] != phase:
                continue
            if "node" in entry:
                print(f"  node  {entry['node']['node']}")
            else:
                print(f"    call  {entry['call']['call']}")
    print(
        "\nthe journal, read from outside: each call and the attempt of its node's run that made it"
    )
    with sqlite3.connect(db) as conn:
        for goal, table in conn.execute("SELECT goal, journal_table FROM goals ORDER BY rowid"):
            rows = conn.execute(f'SELECT key, attempt FROM "{table}" ORDER BY started_at')
            print(f"  {goal}: " + ", ".join(f"{key} (attempt {n})" for key, n in rows))


if __name__ == "__main__":
    sys.exit(main())
