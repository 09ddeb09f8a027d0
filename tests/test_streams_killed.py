"""Streamed model calls that survive a killed process, against a fake OpenAI-compatible server.

The server (tests/openai_server.py) is a real HTTP server in this process that
streams chat completions and Responses events (SSE), keeps background
responses for re-attaching, and counts what it bills. The program is a real
child process (forked from an interpreter that imported ``openai``) that
streams with ``letitloop.adapters.openai`` and SIGKILLs itself after it has
received ``k`` chunks, mid-stream; it then runs again. Meanwhile a reader
follows the run's stream from outside the program (``letitloop.streams.follow``
in a thread of the test: another process than the writer's). Each case runs on
a journal file and on PostgreSQL, sync and async.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import write_script
from openai_server import LENGTH, TOOL_CALLS, FakeOpenAI, answer
from preloaded import Preloaded

pytest.importorskip("openai")
pytest.importorskip("uvicorn")

PROGRAM = """
    import asyncio, hashlib, json, os, signal, sys, threading, time

    import openai

    from letitloop import Journal
    from letitloop.adapters.openai import (
        astream_chat, astream_response, stream_chat, stream_response,
    )
    from letitloop.streams import calls

    DB, MODE, FLAVOR, KILL, URL = sys.argv[1:]
    KILL = int(KILL)
    calls.FLUSH_EVERY = 4  # a batch every 4 chunks: a kill after k chunks leaves some unwritten
    PROMPT = "Tell me a story"
    if MODE == "tools":  # the server stalls after KILL pieces, the first time (its tag: DB's)
        PROMPT = f"Call TOOLS stall={KILL} {hashlib.sha256(DB.encode()).hexdigest()[:8]}"
    MESSAGES = [{"role": "user", "content": PROMPT}]


    def opened(j, client, streaming, chat):
        if MODE == "response":
            return streaming[1](client, "answer", journal=j, model="fake", input=PROMPT)
        options = {"continuation": None} if MODE == "restart" else {}
        return chat(client, "answer", journal=j, model="fake", messages=MESSAGES, **options)


    def killed_when_journaled():
        from letitloop.streams import read

        while len(read("q", path=DB)) < KILL:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGKILL)


    def received(j, n):
        if j.attempt == 1 and n == KILL:
            if MODE == "tools":  # killed once the journal has the KILL chunks the server sent
                threading.Thread(target=killed_when_journaled).start()
            else:
                os.kill(os.getpid(), signal.SIGKILL)


    def said(result):
        out = {"text": result.text, "recoveries": result.recoveries}
        if MODE == "tools":
            out["tool_calls"] = [[c["name"], c["arguments"]] for c in result.tool_calls]
        return json.dumps(out)


    def main():
        client = openai.OpenAI(base_url=URL, api_key="k", max_retries=0)
        with Journal("answers", path=DB, run="q") as j:
            s = opened(j, client, (stream_chat, stream_response), stream_chat)
            n = 0
            for chunk in s:
                n += 1
                received(j, n)
            print(said(s.result))


    async def amain():
        client = openai.AsyncOpenAI(base_url=URL, api_key="k", max_retries=0)
        async with Journal("answers", path=DB, run="q") as j:
            s = opened(j, client, (astream_chat, astream_response), astream_chat)
            n = 0
            async for chunk in s:
                n += 1
                received(j, n)
            print(said(await s.answer()))


    main() if FLAVOR == "sync" else asyncio.run(amain())
"""

#: The chunks the program receives before it kills itself: mid-answer (LENGTH tokens).
KILL_AFTER = 15


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


#: Run once by the forking interpreter before its first fork: what a program's first client,
#: and its first streamed answer of each kind, load on first use (httpx's transport, the SSE
#: decoder, the response types), so that each child does not load it again.
WARM = """
import asyncio, openai
client = openai.OpenAI(base_url=URL, api_key="k", max_retries=0)
for chunk in client.chat.completions.create(
    model="fake", messages=[{"role": "user", "content": "warm"}], stream=True
):
    pass
for event in client.responses.create(model="fake", input="warm", stream=True):
    pass
client.close()


async def main():
    async with openai.AsyncOpenAI(base_url=URL, api_key="k", max_retries=0) as aclient:
        async for chunk in await aclient.chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "warm"}], stream=True
        ):
            pass


asyncio.run(main())
"""


@pytest.fixture(scope="module")
def preloaded(server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Preloaded]:
    """The programs' forker: openai, the adapter, and PostgreSQL's driver and store (half
    the runs are on PostgreSQL) imported once, and :data:`WARM` run against the server."""
    with Preloaded(
        "openai",
        "letitloop.adapters.openai",
        "letitloop.streams",
        "psycopg",
        "letitloop.stores.postgres.storage",
        with_letitloop=True,
        warm=f"URL = {server.url!r}\n" + WARM,
    ) as p:
        # Warmed before a trial counts the server's bills: a first child once it has.
        nothing = write_script(tmp_path_factory.mktemp("warm"), "nothing.py", "")
        assert p.run(nothing).returncode == 0
        yield p


@pytest.fixture(params=["file", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return str(tmp_path / "journal.db")
    import pg_server

    return pg_server.location()


class Trial:
    """One program killed mid-stream and run again, with a reader following from outside."""

    def __init__(self, preloaded: Preloaded, server: FakeOpenAI, where: str, tmp: Path) -> None:
        self.preloaded, self.server, self.where = preloaded, server, where
        self.script = write_script(tmp, "program.py", PROGRAM)
        self.bills_before = len(server.bills)
        self.requests_before = len(server.requests)
        self.followed: list[Any] = []
        self.reader_error: list[BaseException] = []

    def run(self, mode: str, flavor: str, kill: int = KILL_AFTER) -> dict[str, Any]:
        from letitloop.streams import follow

        args = (self.where, mode, flavor, str(kill), self.server.url)
        first = self.preloaded.run(self.script, *args)
        assert first.returncode == -signal.SIGKILL, first.stderr
        # The reader starts after the kill (the run exists) and follows across the rerun.
        reader = threading.Thread(target=self._follow, args=(follow,))
        reader.start()
        second = self.preloaded.run(self.script, *args)
        assert second.returncode == 0, second.stderr
        reader.join(timeout=60)
        assert not reader.is_alive(), "the reader did not see the stream's end"
        assert not self.reader_error, self.reader_error
        return dict(json.loads(second.stdout))

    def _follow(self, follow: Any) -> None:
        try:
            self.followed.extend(follow("q", path=self.where, timeout=30))
        except BaseException as exc:  # handed to the test
            self.reader_error.append(exc)

    @property
    def bills(self) -> list[dict[str, Any]]:
        return self.server.bills[self.bills_before :]

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.server.requests[self.requests_before :]

    def chunks(self, offset: int = 0) -> list[Any]:
        from letitloop.streams import read

        return read("q", offset=offset, path=self.where)

    def usage(self) -> tuple[int, int]:
        """Input and output tokens the journal counts for the run (every try included)."""
        from letitloop.inspection import export_run, find_run, open_inspector

        inspector = open_inspector(self.where)
        try:
            exported = export_run(inspector, find_run(inspector, "q"))
        finally:
            inspector.close()
        usage = exported["usage"]
        return usage["input_tokens"], usage["output_tokens"]


@pytest.fixture
def trial(preloaded: Preloaded, server: FakeOpenAI, where: str, tmp_path: Path) -> Trial:
    return Trial(preloaded, server, where, tmp_path)


WHOLE = "".join(answer("Tell me a story"))
FLAVORS = ["sync", "async"]


def assert_read_once_in_order(trial: Trial) -> None:
    """The reader's chunks are the stream's, each once, in order; any offset reads its tail."""
    everything = trial.chunks()
    assert [c.seq for c in everything] == list(range(len(everything)))
    followed = trial.followed
    assert followed, "the reader saw nothing"
    first = followed[0].seq
    assert [c.seq for c in followed] == list(range(first, len(everything)))
    assert followed == everything[first:]
    assert followed[-1].kind == "end"
    for k in (0, 7, len(everything) - 1):
        assert trial.chunks(offset=k) == everything[k:]


def text_after_last_reset(chunks: list[Any]) -> str:
    resets = [i for i, c in enumerate(chunks) if c.kind == "reset"]
    start = resets[-1] + 1 if resets else 0
    return "".join(c.text for c in chunks[start:])


class TestAResponseInBackgroundMode:
    @pytest.mark.parametrize("flavor", FLAVORS)
    def test_it_is_reattached_after_a_kill_and_paid_once(self, trial: Trial, flavor: str) -> None:
        result = trial.run("response", flavor)
        assert result == {"text": WHOLE, "recoveries": ["reattach"]}
        assert len(trial.bills) == 1  # one generation, billed once
        assert trial.bills[0]["output"] == LENGTH
        reattached = [r for r in trial.requests if r["path"] == "retrieve"]
        assert len(reattached) == 1
        everything = trial.chunks()
        killed = [c for c in everything if c.attempt == 1 and c.mark is not None]
        assert reattached[0]["starting_after"] == int(killed[-1].mark)
        assert [c.kind for c in everything].count("reset") == 0
        assert text_after_last_reset(everything) == WHOLE
        assert_read_once_in_order(trial)
        assert trial.usage() == (trial.bills[0]["input"], LENGTH)


class TestAChatCompletion:
    @pytest.mark.parametrize("flavor", FLAVORS)
    def test_it_continues_from_the_journaled_prefix(self, trial: Trial, flavor: str) -> None:
        result = trial.run("chat", flavor)
        assert result == {"text": WHOLE, "recoveries": ["continue"]}
        everything = trial.chunks()
        prefix = [c for c in everything if c.attempt == 1 and c.kind == "text"]
        assert 0 < len(prefix) < LENGTH  # cut mid-answer (the step reads a few chunks ahead)
        assert len(trial.bills) == 2
        killed, rest = trial.bills
        assert rest["output"] == LENGTH - len(prefix)  # the prefix is not generated again
        assert rest["input"] == killed["input"] + len("".join(c.text for c in prefix).split())
        assert "reset" not in [c.kind for c in everything]
        assert text_after_last_reset(everything) == WHOLE
        assert_read_once_in_order(trial)

    @pytest.mark.parametrize("flavor", FLAVORS)
    def test_without_a_continuation_it_restarts_and_tells_readers(
        self, trial: Trial, flavor: str
    ) -> None:
        result = trial.run("restart", flavor)
        assert result == {"text": WHOLE, "recoveries": ["restart"]}
        everything = trial.chunks()
        assert [c.kind for c in everything].count("reset") == 1
        assert len(trial.bills) == 2 and trial.bills[1]["output"] == LENGTH
        assert text_after_last_reset(everything) == WHOLE
        assert_read_once_in_order(trial)


class TestAChatCompletionEndingWithToolCalls:
    """Text, then two tool calls (4 pieces each): the server stalls after ``cut`` pieces, the
    program is killed once the journal has them all, and runs again."""

    @pytest.mark.parametrize(
        ("cut", "flavor", "how"),
        [
            (20, "sync", "continue"),  # mid-text: both calls to come, at indexes 0 and 1
            (44, "sync", "continue"),  # the first call whole: kept, only the second to come
            (44, "async", "continue"),
            (46, "sync", "restart"),  # the second call cut in its JSON: restarted
        ],
    )
    def test_each_tool_call_comes_once_in_order_and_only_the_rest_is_paid(
        self, trial: Trial, cut: int, flavor: str, how: str
    ) -> None:
        import hashlib

        result = trial.run("tools", flavor, kill=cut)
        tag = hashlib.sha256(trial.where.encode()).hexdigest()[:8]
        calls = [[name, "".join(parts)] for _, name, parts in TOOL_CALLS]
        whole = "".join(answer(f"Call TOOLS stall={cut} {tag}"))
        assert result == {"text": whole, "recoveries": [how], "tool_calls": calls}
        everything = trial.chunks()
        assert [c.kind for c in everything].count("reset") == (how == "restart")
        assert [c.seq for c in everything if c.attempt == 1] == list(range(cut))
        killed, rest = trial.bills
        assert killed["output"] == cut
        pieces = LENGTH + sum(len(parts) for _, _, parts in TOOL_CALLS)
        assert rest["output"] == (pieces if how == "restart" else pieces - cut)
        assert_read_once_in_order(trial)
