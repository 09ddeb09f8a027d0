"""``lil copy`` and ``lil fork`` carry a run's stream chunks (letitloop.streams).

A real program streams two answers: ``told`` to its end, then ``cut``, during which it
is SIGKILLed once 10 chunks are journaled. The real ``lil copy`` copies the run (a
file to another file, PostgreSQL to another schema); a fresh process resumes the copy:
``told`` replays its chunks without a call, ``cut`` continues from its 10 journaled
chunks. ``lil fork --from-step b`` forks the source: the fork keeps ``told``'s chunks
(it replays them) and streams ``cut`` again from its start, nothing of the source's
cut stream carried (the fork runs ``b`` again, and what follows it). The memory store
keeps the same rules, in process.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from helpers import lil_forked, run_forked, write_script

pytestmark = pytest.mark.timeout(120)

PROGRAM = """
    import sys
    import os, signal, time
    from letitloop import Journal, step
    from letitloop.streams import Piece, Recovery, read, stream

    DB = sys.argv[1]
    WORDS = [f"w{i} " for i in range(30)]


    def told():
        print("told called", flush=True)
        yield from ["once ", "upon ", "a ", "time"]


    def cut():
        print("cut called", flush=True)
        for i, word in enumerate(WORDS):
            if i == 10 and os.environ.get("KILL"):
                while len(read("tale", "cut", path=DB)) < 10:  # the first 10 journaled
                    time.sleep(0.02)
                os.kill(os.getpid(), signal.SIGKILL)
            yield Piece.text(word, mark=i + 1)


    def rest(resume):
        print(f"cut continued after {resume.mark}", flush=True)
        after = int(resume.mark)
        rest = (Piece.text(w, mark=i + 1) for i, w in enumerate(WORDS) if i >= after)
        return Recovery("continue", rest)


    with Journal("tales", run="tale", path=DB) as j:
        step("a", int, "1")
        print("told:", "".join(c.text for c in stream("told", told)), flush=True)
        step("b", int, "2")
        s = stream("cut", cut, recover=rest)
        print("cut:", "".join(c.text for c in s), s.result.recoveries, flush=True)
"""

CHUNKS = """
    import json, sys
    from letitloop.streams import read
    chunks = read(sys.argv[2], sys.argv[3], path=sys.argv[1])
    print(json.dumps([[c.seq, c.kind, c.data] for c in chunks]))
"""

WHOLE = "".join(f"w{i} " for i in range(30))


@pytest.fixture(params=["file", "postgres"])
def ends(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """Where the run is streamed, and where it is copied to."""
    if request.param == "file":
        return str(tmp_path / "source.db"), str(tmp_path / "copy.db")
    from pg_server import location

    return location(), location()


def test_a_copy_and_a_fork_carry_the_streams_chunks(tmp_path: Path, ends: tuple[str, str]) -> None:
    source, target = ends
    program = write_script(tmp_path, "tales.py", PROGRAM)
    chunks = write_script(tmp_path, "chunks.py", CHUNKS)

    def run(db: str, **env: str) -> str:
        done = run_forked(program, db, env={**os.environ, **env})
        assert done.returncode == (-signal.SIGKILL if env else 0), done.stderr
        return done.stdout

    def read(db: str, run: str, key: str) -> list[list[object]]:
        done = run_forked(chunks, db, run, key)
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout))

    killed = run(source, KILL="1")
    assert "told: once upon a time" in killed and "cut called" in killed
    told, cut = read(source, "tale", "told"), read(source, "tale", "cut")
    assert [c[2] for c in cut] == [f"w{i} " for i in range(10)]  # no end: the kill cut it

    copied = lil_forked("copy", source, target)
    assert copied.returncode == 0, copied.stderr
    assert read(target, "tale", "told") == told and read(target, "tale", "cut") == cut
    resumed = run(target)
    assert "told called" not in resumed and "cut called" not in resumed  # replayed, continued
    assert "cut continued after 10" in resumed
    assert f"cut: {WHOLE} ('continue',)" in resumed
    assert "told: once upon a time" in resumed

    forked = lil_forked("fork", "tale", "--from-step", "b", "--db", source, "--json")
    assert forked.returncode == 0, forked.stderr
    fork = json.loads(forked.stdout)["run"]["id"]
    assert read(source, fork, "told") == told and read(source, fork, "cut") == []
    again = run(source)
    assert "told called" not in again and "cut called" in again  # a fresh call, not continued
    assert "told: once upon a time" in again and f"cut: {WHOLE} ()" in again
    fresh = read(source, fork, "cut")
    assert [c[1] for c in fresh].count("reset") == 0 and fresh[0][:2] == [0, "text"]


def test_on_the_memory_store_a_copy_and_a_fork_carry_them_too() -> None:
    """The memory store (``memory://``, this process's): the same rules, in process."""
    import uuid

    from letitloop import Journal, step
    from letitloop.inspection import open_inspector
    from letitloop.maintenance import copy_runs, fork_run
    from letitloop.streams import read, stream

    source, target = f"memory://tales-{uuid.uuid4().hex}", f"memory://copy-{uuid.uuid4().hex}"
    with Journal("tales", run="tale", path=source) as j:
        step("a", int, "1")
        assert stream("told", iter, ["once ", "upon"], journal=j).result.text == "once upon"
        step("b", int, "2")
        assert stream("after", iter, ["the ", "end"], journal=j).result.text == "the end"
    told, after = read("tale", "told", path=source), read("tale", "after", path=source)
    assert [c.kind for c in told] == ["text", "text", "end"]
    with Journal("others", path=target) as other:  # the target store, made in this process
        other.step("x", int, "0")
    reader, writer = open_inspector(source, write=True), open_inspector(target, write=True)
    try:
        assert copy_runs(reader, writer).copied
        assert read("tale", "told", path=target) == told
        assert read("tale", "after", path=target) == after
        fork = fork_run(reader, "tale", "b").run.id
    finally:
        reader.close()
        writer.close()
    assert read(fork, "told", path=source) == told  # before the cut: carried
    assert read(fork, "after", path=source) == []  # after it: runs again
