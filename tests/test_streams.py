"""A streamed call as a step (``letitloop.streams``): its chunks journaled, replayed, read.

Sources here are generators (the provider's side is tests/test_streams_killed.py's
fake server); the journal is a real file, read back through a second connection
(``read``, ``lil show``), a PostgreSQL database, or the in-memory store.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until

from letitloop import Journal, unchecked
from letitloop.errors import LetItLoopError, MisuseError
from letitloop.streams import (
    Chunk,
    Piece,
    Recovery,
    Resume,
    astream,
    read,
    stream,
)

WORDS = [f"w{i} " for i in range(30)]


def words(calls: list[str], start: int = 0) -> Iterator[Any]:
    calls.append(f"from {start}")
    yield Piece.state(start, handle="h1")
    for i, w in enumerate(WORDS[start:], start):
        yield Piece.text(w, i + 1)
    yield Piece.usage(input_tokens=5, output_tokens=len(WORDS) - start)


@pytest.fixture(params=["file", "memory", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return str(tmp_path / "journal.db")
    if request.param == "postgres":
        import pg_server

        return pg_server.location()
    return f"memory://streams-{tmp_path.name}"


class TestAStreamThatRunsThrough:
    def test_its_loop_gets_every_chunk_and_its_result_is_the_whole_answer(self, where: str) -> None:
        calls: list[str] = []
        with Journal("answers", path=where, run="q") as j:
            s = stream("answer", words, unchecked(calls), journal=j)
            got = [c.text for c in s]
            assert got == WORDS
            assert s.result.text == "".join(WORDS)
            assert s.result.state == {"handle": "h1"}
            assert s.result.recoveries == ()
            if not where.startswith("memory"):
                return
            rows = j._opened.storage.read_chunks(j.run_id, "answer")  # type: ignore[union-attr]
            assert [r[2] for r in rows] == ["state", *["text"] * 30, "end"]

    def test_a_second_connection_reads_every_chunk_with_its_offset(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        with Journal("answers", path=db, run="q") as j:
            stream("answer", words, [], journal=j).result  # noqa: B018
        chunks = read("q", path=db)
        assert [c.seq for c in chunks] == list(range(32))
        assert [c.kind for c in chunks[:2]] == ["state", "text"]
        assert chunks[-1].kind == "end"
        assert read("q", offset=20, path=db) == chunks[20:]
        with sqlite3.connect(db) as c:  # plain rows, one per chunk, in any SQLite browser
            texts = c.execute(
                "SELECT data FROM stream_chunks WHERE kind = 'text' ORDER BY seq"
            ).fetchall()
        assert "".join(t for (t,) in texts) == "".join(WORDS)

    def test_it_replays_without_calling_and_hands_out_the_same_chunks(self, where: str) -> None:
        calls: list[str] = []
        for _ in range(2):
            with Journal("answers", path=where, run="q") as j:
                s = stream("answer", words, unchecked(calls), journal=j)
                assert [c.text for c in s] == WORDS
                assert s.text == "".join(WORDS)
        assert calls == ["from 0"]

    def test_its_usage_is_recorded_on_the_step(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        with Journal("answers", path=db, run="q") as j:
            stream("answer", words, [], journal=j).result  # noqa: B018
        with sqlite3.connect(db) as c:
            table = c.execute("SELECT journal_table FROM goals").fetchone()[0]
            row = c.execute(f'SELECT input_tokens, output_tokens FROM "{table}"').fetchone()
        assert row == (5, 30)

    def test_async_it_is_the_same(self, where: str) -> None:
        calls: list[str] = []

        async def main() -> list[str]:
            async with Journal("answers", path=where, run="q") as j:
                s = astream("answer", words, unchecked(calls), journal=j)
                got = [c.text async for c in s]
                assert (await s.answer()).text == "".join(WORDS)
                return got

        assert asyncio.run(main()) == WORDS
        assert asyncio.run(main()) == WORDS
        assert calls == ["from 0"]


class TestAStreamThatStalls:
    """A model that pauses (thinking, a slow tool): the chunks before the pause are
    journaled by the flusher, so a reader sees them before the stream goes on."""

    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_a_reader_sees_the_chunks_before_the_pause(self, tmp_path: Path, flavor: str) -> None:
        db = tmp_path / "journal.db"
        go_on = threading.Event()

        def pausing() -> Iterator[str]:
            yield from WORDS[:3]
            go_on.wait(timeout=60)  # until a reader has seen the three
            yield from WORDS[3:]

        async def apausing() -> AsyncIterator[str]:
            for w in WORDS[:3]:
                yield w
            while not go_on.is_set():  # the event loop runs on: the flusher with it
                await asyncio.sleep(0.01)
            for w in WORDS[3:]:
                yield w

        def run() -> None:
            with Journal("answers", path=db, run="q") as j:
                if flavor == "sync":
                    stream("answer", pausing, journal=j).result  # noqa: B018
                else:

                    async def main() -> None:
                        await astream("answer", apausing, journal=j).answer()

                    asyncio.run(main())

        writer = threading.Thread(target=run)
        writer.start()
        try:

            def journaled() -> int:
                try:
                    return len(read("q", path=db))
                except LetItLoopError:  # no file, or no run yet
                    return 0

            wait_until(lambda: journaled() >= 3, "the three chunks before the pause are journaled")
            assert [c.text for c in read("q", path=db)] == WORDS[:3]
        finally:
            go_on.set()
            writer.join(timeout=60)
        assert "".join(c.text for c in read("q", path=db)) == "".join(WORDS)


class TestAStreamCutBeforeItsEnd:
    """A ``break`` out of the loop (a process killed is test_streams_killed.py's)."""

    def test_the_next_attempt_recovers_from_what_was_journaled(self, where: str) -> None:
        calls: list[str] = []
        seen: list[tuple[str, dict[str, Any], str | None]] = []

        def recover(resume: Resume, calls: list[str]) -> Recovery:
            seen.append((resume.text, dict(resume.state), resume.mark))
            return Recovery("reattach", words(calls, int(resume.mark or 0)))

        with Journal("answers", path=where, run="q") as j:
            for n, _ in enumerate(
                stream("answer", words, unchecked(calls), recover=recover, journal=j), 1
            ):
                if n == 10:
                    break  # the step is left unrecorded (StreamAbandonedError, recorded)
        with Journal("answers", path=where, run="q") as j:
            s = stream("answer", words, unchecked(calls), recover=recover, journal=j)
            assert [c.text for c in s] == WORDS  # the prefix from the journal, then the rest
            assert s.result.recoveries == ("reattach",)
        ((text, state, mark),) = seen
        assert state == {"handle": "h1"}
        assert 10 <= int(mark or 0) < len(WORDS)  # mid-stream (the step reads a few ahead)
        assert text == "".join(WORDS[: int(mark or 0)])
        assert calls == ["from 0", f"from {mark}"]

    def test_async_a_break_leaves_it_unrecorded_and_it_recovers(self, where: str) -> None:
        calls: list[str] = []

        def recover(resume: Resume, calls: list[str]) -> Recovery:
            return Recovery("reattach", words(calls, int(resume.mark or 0)))

        async def main(stop: int | None) -> list[str]:
            async with Journal("answers", path=where, run="q") as j:
                s = astream("answer", words, unchecked(calls), recover=recover, journal=j)
                got = []
                async for chunk in s:
                    got.append(chunk.text)
                    if len(got) == stop:
                        break
                return got

        assert len(asyncio.run(main(10))) == 10
        assert asyncio.run(main(None)) == WORDS
        assert calls[0] == "from 0" and len(calls) == 2

    def test_without_a_recovery_it_restarts_after_a_reset(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        calls: list[str] = []
        with pytest.raises(RuntimeError), Journal("answers", path=db, run="q") as j:
            for n, _ in enumerate(stream("answer", words, unchecked(calls), journal=j), 1):
                if n == 10:
                    raise RuntimeError("the loop's own code failed")
        with Journal("answers", path=db, run="q") as j:
            s = stream("answer", words, unchecked(calls), journal=j)
            assert [c.text for c in s] == WORDS  # after the reset only
            assert s.result.recoveries == ("restart",)
        kinds = [c.kind for c in read("q", path=db)]
        assert kinds.count("reset") == 1 and kinds[-1] == "end"
        assert calls == ["from 0", "from 0"]

    def test_a_tool_call_cut_in_its_json_is_told_apart_from_a_whole_one(self) -> None:
        def tool(seq: int, delta: dict[str, Any]) -> Chunk:
            return Chunk(seq, "tool", json.dumps(delta))

        resume = Resume.of(
            [
                tool(0, {"index": 0, "id": "a", "name": "f", "arguments": '{"x": 1}'}),
                tool(1, {"index": 1, "id": "b", "name": "g", "arguments": '{"y": '}),
            ]
        )
        assert resume.tool_calls == {0: {"id": "a", "name": "f", "arguments": '{"x": 1}'}}
        assert resume.partial_tools == {1}


class TestTheOpenAIHooks:
    """A kill after the provider's last event but before the stream's end: no call."""

    def test_a_chat_whose_finish_was_journaled_is_not_asked_again(self) -> None:
        from letitloop.adapters.openai import chat

        resume = Resume.of([Chunk(0, "text", "Hi"), Chunk(1, "state", '{"finish_reason":"stop"}')])
        found = chat._recover(resume, None, chat.assistant_prefix, model="m", messages=[])
        assert found is not None and found.how == "continue" and found.pieces == ()

    def test_a_response_journaled_to_completed_is_not_reattached(self) -> None:
        from letitloop.adapters.openai import responses

        resume = Resume.of(
            [
                Chunk(0, "state", '{"response_id":"resp_1"}', "0"),
                Chunk(1, "text", "Hi", "3"),
                Chunk(2, "state", '{"status":"completed"}', "5"),
            ]
        )
        found = responses._recover(resume, None, model="m", input="x")
        assert found is not None and found.how == "reattach" and found.pieces == ()


class TestBadInput:
    def test_a_source_that_yields_something_else_is_refused_clearly(self, tmp_path: Path) -> None:
        def odd() -> Iterator[Any]:
            yield 42

        with (
            Journal("answers", path=tmp_path / "j.db", run="q") as j,
            pytest.raises(MisuseError, match="expected text"),
        ):
            stream("answer", odd, journal=j).result  # noqa: B018

    def test_a_call_made_before_the_step_is_refused(self, tmp_path: Path) -> None:
        with (
            Journal("answers", path=tmp_path / "j.db", run="q") as j,
            pytest.raises(MisuseError, match="not stream"),
        ):
            stream("answer", words([]), journal=j)  # type: ignore[arg-type]

    def test_a_recovery_of_an_unknown_kind_is_refused(self) -> None:
        with pytest.raises(MisuseError, match="'reattach' or 'continue'"):
            Recovery("again", [])


class TestLilShowFollow:
    def test_it_prints_the_streams_text(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        with Journal("answers", path=db, run="q") as j:
            stream("answer", words, [], journal=j).result  # noqa: B018
        shown = subprocess.run(
            [sys.executable, "-m", "letitloop", "show", "q", "--follow", "--db", str(db)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        assert "stream answer:" in shown.stdout
        assert "".join(WORDS) in shown.stdout

    def test_with_json_it_prints_a_record_per_chunk(self, tmp_path: Path) -> None:
        db = tmp_path / "journal.db"
        with Journal("answers", path=db, run="q") as j:
            stream("answer", words, unchecked([]), journal=j).result  # noqa: B018
        argv = ["show", "q", "--follow", "--json", "--db", str(db)]
        shown = subprocess.run(
            [sys.executable, "-m", "letitloop", *argv], capture_output=True, text=True, timeout=60
        )
        assert shown.returncode == 0, shown.stderr
        records = [json.loads(line) for line in shown.stdout.splitlines()]
        chunks = [r for r in records if r.get("record") == "chunk"]
        assert [c["seq"] for c in chunks] == list(range(32))
        assert "".join(c["text"] for c in chunks) == "".join(WORDS)


class TestAResetRun:
    def test_its_chunks_go_with_it(self, where: str) -> None:
        from letitloop.inspection import open_inspector
        from letitloop.maintenance import reset_run

        with Journal("answers", path=where, run="q") as j:
            stream("answer", words, unchecked([]), journal=j).result  # noqa: B018
            run_id = j.run_id
        inspector = open_inspector(where, write=True)
        try:
            assert len(inspector.stream_chunks(run_id, "answer")) == 32
            reset_run(inspector, "q")
            assert inspector.stream_keys(run_id) == []
            assert inspector.stream_chunks(run_id, "answer") == []
        finally:
            inspector.close()
