"""Write a golden journal and what resuming it gave, with the letitloop on PYTHONPATH.

``PYTHONPATH=RELEASE python tests/golden/generate.py NAME``, where RELEASE is a
checkout of the release that writes the file (its letitloop package is the one
imported by the programs), writes ``tests/golden/NAME.db`` and
``tests/golden/NAME.json``:

1. each of NAME's writes (below) runs its program in a fresh process: each
   leaves a run in flight (SIGKILLed at a point the program names, or
   stopped to wait for input), all in the one journal file;
2. the file is checkpointed into one file (no ``-wal`` to commit) and kept;
3. a copy of it is resumed the way the golden test resumes it: the setup
   (``send``: answer a wait) and each program run again, without a kill; what
   each run printed and the calls its functions made (the side file's lines)
   are NAME.json. The golden test (tests/test_golden.py) resumes another copy
   with today's letitloop and expects the same.

``generate.py fingerprints`` writes ``fingerprints.json`` instead: each kind of
argument of programs/fingerprint_kinds.py and its fingerprints.

Never run this over a golden file that is committed: it is the record of what
an earlier release wrote. Generate a new NAME for a new release instead.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

GOLDEN = Path(__file__).resolve().parent
PROGRAMS = GOLDEN / "programs"

#: The order the scenarios of programs/primitives.py are written (one goal each);
#: ``generations-first`` completes a run the later ``generations`` opens afresh.
PRIMITIVES = [
    "generations-first",
    "budget",
    "patches",
    "markers",
    "waits",
    "retries",
    "sealed",
    "encrypted",
    "generations",
    "arguments",
    "durable",
    "asynchronous",
]

#: NAME: its writes, its setup before resuming, its resumes. A write or a resume is a
#: program of programs/ and its arguments ("{db}": the journal file, "{side}": the side
#: file its functions write what they ran to); each runs with LETITLOOP_DB set to the file.
GOLDENS: dict[str, dict[str, Any]] = {
    "primitives": {
        "writes": [("primitives.py", ["{db}", "{side}", s, "1"]) for s in PRIMITIVES],
        "setup": [("send", "w", "approval", {"ok": True})],
        "resumes": [
            ("primitives.py", ["{db}", "{side}", s, "0"])
            for s in PRIMITIVES
            if s != "generations-first"
        ],
    },
}

#: The adapters' programs (copies of tests/*.py as they were at 66860b7), each killed
#: once where finished model and tool calls are recorded and one is in flight, then
#: resumed: ``(program, mode, kill point, more arguments)``.
ADAPTERS = {
    "smolagents": ("smolagents_team.py", "team", "model researcher 1", []),
    "autogen": ("autogen_team.py", "team", "model analyst 1", []),
    "openai_agents": ("openai_agents_team.py", "team", "model analyst 1", []),
    "pydantic_ai": (
        "pydantic_ai_trip.py",
        "async",
        "tool book Book me a hotel in Paris",
        ["Book me a hotel in Paris"],
    ),
    "dspy": ("dspy_requests.py", "ask", "lm answer Oslo", []),
    "llamaindex": ("llamaindex_agents.py", "team", "model writer 3", []),
    "llamaindex_workflow": ("llamaindex_requests.py", "ask", "summarize Oslo", []),
    "mcp": ("mcp_requests.py", "ask", "quote Oslo", []),
}
#: LangGraph's graph on the saver, its durable node killed in its second step.
GOLDENS["langgraph"] = {
    "writes": [
        (
            "langgraph_graph.py",
            ["{db}", "{side}", "draft OUTLINE SEARCH EELS / SUMMARIZE SEARCH EELS"],
        )
    ],
    "setup": [],
    "resumes": [("langgraph_graph.py", ["{db}", "{side}", ""])],
}
GOLDENS["streams"] = {  # streamed steps (issue 55): one complete, one killed mid-stream
    "writes": [("streams.py", ["{db}", "{side}", "kill"])],
    "setup": [],
    "resumes": [("streams.py", ["{db}", "{side}", ""])],
}
for _name, (_program, _mode, _kill, _more) in ADAPTERS.items():
    GOLDENS[_name] = {
        "writes": [(_program, [_mode, "{db}", "{side}", _kill, *_more])],
        "setup": [],
        "resumes": [(_program, [_mode, "{db}", "{side}", "", *_more])],
    }


#: ``python LAUNCHER NOW PROGRAM ARGS...``: PROGRAM as ``python PROGRAM ARGS...`` runs it,
#: its journals' default clock (letitloop.testing) set back to NOW (seconds since the epoch),
#: from where it runs at the real rate.
LAUNCHER = GOLDEN / "launch.py"

#: What the programs of programs/ import: their frameworks and letitloop's adapters. A
#: forking interpreter that imported them once (tests/preloaded.py) runs each program in a
#: child forked from it, a process of its own, as ``python PROGRAM`` would run it
#: (:func:`run`'s ``forker``); some 20 fresh interpreters each importing a framework took
#: about 13 s of CPU, this about 8 s. A module a program imports that is not listed here
#: its child imports itself.
PROGRAM_IMPORTS = (
    "agents",
    "autogen_agentchat.agents",
    "autogen_agentchat.teams",
    "autogen_ext.models.replay",
    "dspy",
    "dspy.utils.dummies",
    "langgraph.graph",
    "llama_index.core.agent.workflow",
    "llama_index.core.llms.mock",
    "mcp.server.mcpserver",
    "pydantic_ai",
    "pydantic_ai.models.function",
    "smolagents",
    "workflows",
    "letitloop.adapters.autogen",
    "letitloop.adapters.dspy",
    "letitloop.adapters.langgraph",
    "letitloop.adapters.llamaindex",
    "letitloop.adapters.openai_agents",
    "letitloop.adapters.pydantic_ai",
    "letitloop.adapters.smolagents",
    "letitloop.mcp",
)


class Forker(Protocol):
    """What runs a program in a child forked from a preloaded interpreter: a
    ``Preloaded`` of tests/preloaded.py."""

    def run(
        self, script: Path, *args: str, env: dict[str, str] | None = ..., cwd: Path | None = ...
    ) -> subprocess.CompletedProcess[str]: ...


def written_at(db: Path) -> float | None:
    """When ``db``'s runs last changed (seconds since the epoch), or None for none."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (last,) = conn.execute("SELECT max(updated_at) FROM runs").fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return None if last is None else datetime.fromisoformat(last).timestamp()


def run(
    program: str,
    db: Path,
    side: Path,
    args: list[str],
    now: float | None = None,
    forker: Forker | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python PROGRAM ARGS...`` in a fresh process, in a scratch folder, with the
    letitloop this process imported and LETITLOOP_DB set to ``db``; with ``now``, its
    journals' clock starts at ``now`` (:data:`LAUNCHER`). With ``forker``, the process is
    a child forked from its preloaded interpreter (same program, arguments, folder and
    environment), not a fresh interpreter."""
    import letitloop

    path = [str(Path(letitloop.__file__).resolve().parent.parent), *sys.path]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "LETITLOOP_DB": str(db)}
    argv = [a.format(db=db, side=side) for a in args]
    launch = [] if now is None else [str(LAUNCHER), repr(now)]
    with tempfile.TemporaryDirectory() as cwd:
        if forker is not None:
            command = [*launch, str(PROGRAMS / program), *argv]
            return forker.run(Path(command[0]), *command[1:], env=env, cwd=Path(cwd))
        return subprocess.run(
            [sys.executable, *launch, str(PROGRAMS / program), *argv],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=cwd,
            env=env,
        )


def setup(db: Path, steps: list[tuple[Any, ...]]) -> None:
    """What happens between the write and the resume: a wait answered with ``send``."""
    from letitloop import send

    for what, *rest in steps:
        assert what == "send", what
        run_ref, name, value = rest
        send(run_ref, name, value, path=db)


def resume(golden: str, db: Path, side: Path, forker: Forker | None = None) -> list[dict[str, Any]]:
    """Each resume of ``golden`` on ``db``: its exit status, last line printed, and calls
    (each program run by :func:`run`, in a child of ``forker`` if given).

    The resumes run on the clock of the file's writing (a second after its last change):
    a request answered then is answered from the journal for ``DEFAULT_REUSE`` (an hour)
    after, and asked again later, as it should be; the resumes' calls must not depend on
    how long ago the file was written."""
    spec = GOLDENS[golden]
    last = written_at(db)
    now = None if last is None else last + 1
    setup(db, spec["setup"])
    out = []
    for program, args in spec["resumes"]:
        side.write_text("")
        done = run(program, db, side, args, now, forker)
        lines = done.stdout.strip().splitlines()
        out.append(
            {
                "program": program,
                "args": args,
                "returncode": done.returncode,
                "printed": lines[-1] if lines else "",
                "calls": sorted(side.read_text().splitlines()),
                **({"stderr": done.stderr[-2000:]} if done.returncode else {}),
            }
        )
    return out


def checkpoint(db: Path) -> None:
    """Every committed page into the main file, the -wal emptied (then removed)."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def beside(db: Path) -> list[Path]:
    """The files a program keeps beside its journal (the OpenAI Agents SDK's session:
    ``NAME.db.session``), part of the golden data with it."""
    return sorted(
        p for p in db.parent.glob(f"{db.name}.*") if not p.name.endswith(("-wal", "-shm"))
    )


def copy(golden: str, folder: Path) -> Path:
    """A copy of golden journal ``golden`` (and the files beside it) in ``folder``."""
    db = folder / f"{golden}.db"
    for path in [GOLDEN / f"{golden}.db", *beside(GOLDEN / f"{golden}.db")]:
        shutil.copy(path, folder / path.name)
    return db


def fingerprints() -> dict[str, Any]:
    """Each kind of programs/fingerprint_kinds.py: its fingerprint as a step's argument
    (``call``) and as a run's input (``input``), or what refused it."""
    sys.path.insert(0, str(PROGRAMS))
    try:
        import fingerprint_kinds as kinds  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(PROGRAMS))
    from letitloop.identity.fingerprint import Fingerprinter

    fp = Fingerprinter(kinds.REGISTRY)

    def outcome(compute: Any) -> str:
        try:
            return str(compute())
        except Exception as exc:
            return f"refused: {type(exc).__name__}"

    out: dict[str, Any] = {}
    for kind, value in kinds.KINDS:
        out[kind] = {
            "call": outcome(lambda: fp.call((value,), {})),  # noqa: B023
            "input": outcome(lambda: fp.whole(value)),  # noqa: B023
            "named run's input": outcome(lambda: fp.whole(value, strict=False)),  # noqa: B023
        }
    for kind, args, kwargs in kinds.CALLS:
        out[kind] = {"call": outcome(lambda: fp.call(args, kwargs))}  # noqa: B023
    return out


def written_by() -> str:
    import letitloop

    return f"letitloop {letitloop.__version__} from {Path(letitloop.__file__).parent}"


def generate(golden: str) -> None:
    if golden == "fingerprints":
        pinned = {"written_by": written_by(), "kinds": fingerprints()}
        (GOLDEN / "fingerprints.json").write_text(json.dumps(pinned, indent=1) + "\n")
        return

    spec = GOLDENS[golden]
    with tempfile.TemporaryDirectory() as scratch:
        db, side = Path(scratch) / f"{golden}.db", Path(scratch) / "side"
        writes = []
        for program, args in spec["writes"]:
            done = run(program, db, side, args)
            writes.append({"program": program, "args": args, "returncode": done.returncode})
        for path in [db, *beside(db)]:
            checkpoint(path)  # the SDK's session is an SQLite file too
        for path in [db, *beside(db)]:
            shutil.copy(path, GOLDEN / path.name)
        expected = resume(golden, db, side)
    record: dict[str, Any] = {
        "written_by": written_by(),
        "writes": writes,
        "resumes": expected,
    }
    (GOLDEN / f"{golden}.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    generate(sys.argv[1])
