"""Journaled MCP tool calls (:class:`letitloop.mcp.DurableMCP`): a side effect never runs twice.

A real MCP server, written here with the SDK, runs as a stdio child
process; it writes a line to a side file when it starts and for every
execution of a tool, so the tests count what ran on the server, across
processes. The agent is a real program SIGKILLed mid-call and run again;
the server is SIGKILLed mid-call under a live client. Each server is forked
from an interpreter that imported the SDK's server once, on the client's
pipes (tests/stdio_servers.py); docs/mcp.md's program starts its server
fresh, as printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crashtest_examples import crashtest_example
from helpers import lil_forked, wait_until, write_script
from mcp import StdioServerParameters
from mcp.shared.exceptions import MCPError
from preloaded import Preloaded
from stdio_servers import StdioServers

from letitloop import Journal
from letitloop.mcp import DurableMCP, may_send_again

SHOP = """
    import json, os, sys, time

    if os.path.exists(os.environ["SHOP_REFUSE"]):
        sys.exit(3)  # a server that cannot start: the client cannot connect

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    LOG = os.environ["SHOP_LOG"]
    GATE = os.environ["SHOP_GATE"]  # the slow tools wait until this file exists
    PARENT = os.getppid()


    def note(event, **more):
        with open(LOG, "a") as f:
            f.write(json.dumps({"event": event, "pid": os.getpid(), **more}) + "\\n")


    def slowly():
        while not os.path.exists(GATE):
            if os.getppid() != PARENT:  # the client was killed: do not outlive it
                os._exit(0)
            time.sleep(0.02)


    note("start")
    shop = MCPServer("shop")
    CHANGES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)
    READS = ToolAnnotations(read_only_hint=True)


    @shop.tool(annotations=CHANGES)
    def charge(order: int) -> str:
        note("charge", order=order)
        return f"charged order {order}"


    @shop.tool(annotations=CHANGES)
    def charge_slowly(order: int, key: str = "") -> str:
        note("charge_slowly", order=order, key=key)
        slowly()
        return f"charged order {order}, slowly"


    @shop.tool(annotations=READS)
    def lookup(order: int) -> str:
        note("lookup", order=order)
        return f"order {order} is paid"


    @shop.tool(annotations=READS)
    def lookup_slowly(order: int) -> str:
        note("lookup_slowly", order=order)
        slowly()
        return f"order {order} is paid, slowly"


    @shop.tool(annotations=CHANGES)
    def refund(order: int) -> str:
        note("refund", order=order)
        raise ToolError(f"order {order} was never charged")


    shop.run()
"""

AGENT = """
    import asyncio, json, os, sys

    from mcp import StdioServerParameters

    from letitloop import Journal
    from letitloop.mcp import DurableMCP

    COMMAND, *ARGS = json.loads(os.environ["SHOP"])
    SHOP = StdioServerParameters(command=COMMAND, args=ARGS, env=json.loads(os.environ["SHOP_ENV"]))


    async def main():
        async with Journal("agent", path=os.environ["DB"], run="order-7") as j:
            async with DurableMCP(SHOP) as shop:
                for tool in sys.argv[1:]:
                    if os.environ.get("MARKER"):  # docs/mcp.md's guarded call
                        async with j.atomic_marker(tool) as offer:
                            if offer:
                                key = offer.idempotency_key
                                result = await shop.call_tool(
                                    tool, {"order": 7, "key": key}, idempotency_key=key
                                )
                                print(tool, result.is_error, result.content[0].text, flush=True)
                        continue
                    result = await shop.call_tool(tool, {"order": 7})
                    print(tool, result.is_error, result.content[0].text, flush=True)


    asyncio.run(main())
"""


class Shop:
    """The server's script, its side file and its switches."""

    def __init__(self, folder: Path, agents: Preloaded, servers: StdioServers) -> None:
        #: Forks the agents' processes (from an interpreter that imported the MCP SDK once).
        self.agents = agents
        #: Forks the server's processes (from an interpreter that imported its SDK once).
        self.servers = servers
        self.script = write_script(folder, "shop.py", SHOP)
        self.log = folder / "shop.log"
        self.gate = folder / "gate"
        self.refuse = folder / "refuse"
        self.env = {
            "SHOP_LOG": str(self.log),
            "SHOP_GATE": str(self.gate),
            "SHOP_REFUSE": str(self.refuse),
        }

    def command(self) -> list[str]:
        """The client's command that starts the server (``python shop.py``, forked)."""
        return self.servers.command(str(self.script))

    def params(self) -> StdioServerParameters:
        command, *args = self.command()
        return StdioServerParameters(command=command, args=args, env=self.env)

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        lines = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [e for e in lines if kind is None or e["event"] == kind]

    def count(self, kind: str) -> int:
        return len(self.events(kind))

    def pids(self) -> list[int]:
        return [e["pid"] for e in self.events("start")]


@pytest.fixture(scope="module")
def mcp_sdk() -> Iterator[Preloaded]:
    """Forks the processes from an interpreter that imported the MCP SDK, letitloop's client
    and what a client imports at its first call (jsonschema, to check a tool's result) once."""
    with Preloaded(
        "mcp", "letitloop.mcp", "jsonschema.validators", with_letitloop=True
    ) as preloaded:
        yield preloaded


@pytest.fixture(scope="module")
def shop_servers() -> Iterator[StdioServers]:
    """Forks the shop's server processes from an interpreter that imported the SDK's server
    and what it imports at its first request once."""
    with StdioServers(*SERVER_MODULES) as servers:
        yield servers


#: What a stdio server of the MCP SDK imports before it answers its first request.
SERVER_MODULES = (
    "mcp.server.mcpserver",
    "mcp.server.mcpserver.exceptions",
    "mcp.server.stdio",
    "mcp.types",
    "anyio._backends._asyncio",
)


@pytest.fixture
def shop(tmp_path: Path, mcp_sdk: Preloaded, shop_servers: StdioServers) -> Iterator[Shop]:
    made = Shop(tmp_path, mcp_sdk, shop_servers)
    yield made
    for pid in made.pids():  # a server a test left behind
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def agent(folder: Path, shop: Shop, db: Path, marker: bool = False) -> tuple[Path, dict[str, str]]:
    script = write_script(folder, "agent.py", AGENT)
    env = {"SHOP": json.dumps(shop.command()), "SHOP_ENV": json.dumps(shop.env), "DB": str(db)}
    return script, {**env, "MARKER": "1"} if marker else env


def run_agent(
    folder: Path, shop: Shop, db: Path, *tools: str, marker: bool = False
) -> subprocess.CompletedProcess[str]:
    script, env = agent(folder, shop, db, marker)
    return shop.agents.run(script, *tools, env={**os.environ, **env})


def kill_agent_in(
    folder: Path, shop: Shop, db: Path, tool: str, *tools: str, marker: bool = False
) -> None:
    """Start the agent, SIGKILL it once the server runs ``tool``, and wait for it to die."""
    script, env = agent(folder, shop, db, marker)
    child = shop.agents.start(script, *tools, env={**os.environ, **env})
    try:
        wait_until(lambda: shop.count(tool) == 1, f"the server runs {tool}", timeout=90)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()


def lil(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``lil --db DB ARGS`` (``python -m letitloop``), forked (tests/helpers.py)."""
    return lil_forked("--db", str(db), *args)


class TestAnAgentKilledMidCall:
    def test_finished_calls_replay_and_the_read_only_call_in_flight_runs_again(
        self, tmp_path: Path, shop: Shop, db: Path
    ) -> None:
        tools = ("charge", "refund", "lookup_slowly")
        kill_agent_in(tmp_path, shop, db, "lookup_slowly", *tools)
        assert (shop.count("charge"), shop.count("refund")) == (1, 1)
        shop.gate.touch()
        resumed = run_agent(tmp_path, shop, db, *tools)
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.splitlines() == [
            "charge False charged order 7",
            "refund True Error executing tool refund: order 7 was never charged",  # replayed
            "lookup_slowly False order 7 is paid, slowly",
        ]
        assert shop.count("charge") == 1  # ran exactly once overall
        assert shop.count("refund") == 1
        assert shop.count("lookup_slowly") == 2  # in doubt and read-only: sent again

    def test_a_full_replay_starts_no_server(self, tmp_path: Path, shop: Shop, db: Path) -> None:
        first = run_agent(tmp_path, shop, db, "charge", "refund")
        assert first.returncode == 0, first.stderr
        assert len(shop.pids()) == 1
        again = run_agent(tmp_path, shop, db, "charge", "refund")
        assert again.returncode == 0, again.stderr
        assert again.stdout == first.stdout
        assert len(shop.pids()) == 1  # no session was opened, no server started
        assert (shop.count("charge"), shop.count("refund")) == (1, 1)


class TestADestructiveCallInDoubt:
    def test_is_not_sent_again_until_a_person_allows_one_rerun(
        self, tmp_path: Path, shop: Shop, db: Path
    ) -> None:
        kill_agent_in(tmp_path, shop, db, "charge_slowly", "charge_slowly")
        shop.gate.touch()
        stopped = run_agent(tmp_path, shop, db, "charge_slowly")
        assert stopped.returncode == 75, stopped.stderr
        assert (
            "'charge_slowly'" in stopped.stderr and "mcp:charge_slowly/decision" in stopped.stderr
        )
        assert shop.count("charge_slowly") == 1  # not re-run
        assert len(shop.pids()) == 1  # deciding to stop needed no server
        assert "waiting" in lil(db, "runs").stdout
        again = run_agent(tmp_path, shop, db, "charge_slowly")
        assert again.returncode == 75 and shop.count("charge_slowly") == 1  # still undecided
        sent = lil(db, "send", "order-7", "mcp:charge_slowly/decision", '"rerun"')
        assert sent.returncode == 0, sent.stderr
        resumed = run_agent(tmp_path, shop, db, "charge_slowly")
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout == "charge_slowly False charged order 7, slowly\n"
        assert shop.count("charge_slowly") == 2  # the one rerun allowed
        replayed = run_agent(tmp_path, shop, db, "charge_slowly")
        assert replayed.stdout == resumed.stdout and shop.count("charge_slowly") == 2

    def test_a_result_the_person_records_is_returned_without_sending_it(
        self, tmp_path: Path, shop: Shop, db: Path
    ) -> None:
        kill_agent_in(tmp_path, shop, db, "charge_slowly", "charge_slowly")
        assert run_agent(tmp_path, shop, db, "charge_slowly").returncode == 75
        decision = json.dumps({"result": "charged by hand"})
        assert lil(db, "send", "order-7", "mcp:charge_slowly/decision", decision).returncode == 0
        resumed = run_agent(tmp_path, shop, db, "charge_slowly")
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout == "charge_slowly False charged by hand\n"
        assert shop.count("charge_slowly") == 1
        assert len(shop.pids()) == 1


class TestACallInDoubtGuardedByAMarkerAndItsKey:
    def test_is_sent_again_with_the_same_key_without_asking(
        self, tmp_path: Path, shop: Shop, db: Path
    ) -> None:
        kill_agent_in(tmp_path, shop, db, "charge_slowly", "charge_slowly", marker=True)
        shop.gate.touch()
        resumed = run_agent(tmp_path, shop, db, "charge_slowly", marker=True)
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout == "charge_slowly False charged order 7, slowly\n"
        keys = [e["key"] for e in shop.events("charge_slowly")]
        assert len(keys) == 2 and keys[0] == keys[1]  # the server can deduplicate it
        assert keys[0].endswith(":charge_slowly")


def in_journal(db: Path, body: Any) -> Any:
    """Run ``body(journal)`` (a coroutine function) inside an open journal."""

    async def main() -> Any:
        async with Journal("live", path=db) as j:
            return await body(j)

    return asyncio.run(main())


async def until(done: Any, what: str, timeout: float = 90.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting until {what}")
        await asyncio.sleep(0.02)


class TestASessionThatDiesMidCall:
    def test_the_call_raises_is_not_repeated_and_the_next_call_opens_a_new_session(
        self, shop: Shop, db: Path
    ) -> None:
        async def body(j: Journal) -> Any:
            async with DurableMCP(shop.params()) as tools:
                call = asyncio.create_task(tools.call_tool("charge_slowly", {"order": 1}))
                await until(lambda: shop.count("charge_slowly") == 1, "the call runs")
                os.kill(shop.pids()[0], signal.SIGKILL)
                with pytest.raises(MCPError):
                    await call
                after = await tools.call_tool("lookup", {"order": 1})
                return after, tools.sessions.opened

        after, opened = in_journal(db, body)
        assert not after.is_error and after.content[0].text == "order 1 is paid"
        assert opened == 2
        assert len(set(shop.pids())) == 2  # a new server process
        assert shop.count("charge_slowly") == 1  # raised, never repeated

    def test_the_next_attempt_of_the_run_finds_that_call_in_doubt(
        self, shop: Shop, db: Path
    ) -> None:
        from letitloop.mcp import ToolCallInDoubt

        async def attempt(kill: bool) -> None:
            async with Journal("live", path=db, run="r"), DurableMCP(shop.params()) as tools:
                call = asyncio.create_task(tools.call_tool("charge_slowly", {"order": 1}))
                if kill:
                    await until(lambda: shop.count("charge_slowly") == 1, "the call runs")
                    os.kill(shop.pids()[0], signal.SIGKILL)
                await call

        with pytest.raises(MCPError):
            asyncio.run(attempt(kill=True))  # the run fails with the transport's error
        with pytest.raises(ToolCallInDoubt) as stopped:
            asyncio.run(attempt(kill=False))
        assert stopped.value.key == "mcp:charge_slowly/decision"
        assert shop.count("charge_slowly") == 1 and len(shop.pids()) == 1

    def test_concurrent_calls_that_find_it_dead_renew_it_once(self, shop: Shop, db: Path) -> None:
        async def body(j: Journal) -> Any:
            async with DurableMCP(shop.params()) as tools:
                calls = [
                    asyncio.create_task(tools.call_tool("charge_slowly", {"order": n}, key=f"c{n}"))
                    for n in (1, 2)
                ]
                await until(lambda: shop.count("charge_slowly") == 2, "both calls run")
                os.kill(shop.pids()[0], signal.SIGKILL)
                failed = await asyncio.gather(*calls, return_exceptions=True)
                after = await asyncio.gather(
                    *(tools.call_tool("lookup", {"order": n}, key=f"l{n}") for n in (1, 2, 3))
                )
                return failed, after, tools.sessions.opened

        failed, after, opened = in_journal(db, body)
        assert all(isinstance(f, MCPError) for f in failed), failed
        assert [a.is_error for a in after] == [False, False, False]
        assert opened == 2 and len(shop.pids()) == 2
        assert shop.count("charge_slowly") == 2 and shop.count("lookup") == 3

    def test_a_renewal_that_cannot_connect_raises_and_the_call_after_tries_again(
        self, shop: Shop, db: Path
    ) -> None:
        async def body(j: Journal) -> Any:
            async with DurableMCP(shop.params()) as tools:
                call = asyncio.create_task(tools.call_tool("charge_slowly", {"order": 1}))
                await until(lambda: shop.count("charge_slowly") == 1, "the call runs")
                shop.refuse.touch()
                os.kill(shop.pids()[0], signal.SIGKILL)
                with pytest.raises(MCPError):
                    await call
                with pytest.raises(Exception):  # noqa: B017 (what a dead start raises)
                    await tools.call_tool("lookup", {"order": 1}, key="refused")
                shop.refuse.unlink()
                after = await tools.call_tool("lookup", {"order": 1}, key="accepted")
                return after, tools.sessions.opened

        after, opened = in_journal(db, body)
        assert not after.is_error
        assert opened == 2 and len(shop.pids()) == 2
        assert shop.count("lookup") == 1

    def test_suspecting_a_healthy_session_costs_one_reconnection(
        self, shop: Shop, db: Path
    ) -> None:
        async def body(j: Journal) -> Any:
            async with DurableMCP(shop.params(), read_timeout_seconds=1.0) as tools:
                with pytest.raises(MCPError):  # the server is fine; the reply is late
                    await tools.call_tool("lookup_slowly", {"order": 1})
                shop.gate.touch()
                after = [
                    await tools.call_tool("lookup", {"order": n}, key=f"l{n}") for n in (1, 2, 3)
                ]
                return after, tools.sessions.opened

        after, opened = in_journal(db, body)
        assert [a.is_error for a in after] == [False, False, False]
        assert opened == 2 and len(shop.pids()) == 2


class TestWhichCallsInDoubtAreSentAgain:
    @pytest.mark.parametrize(
        ("hints", "key", "again"),
        [
            ({"read_only_hint": True}, None, True),
            ({"read_only_hint": False, "idempotent_hint": True}, None, True),
            ({"read_only_hint": False, "destructive_hint": True}, None, False),
            ({"read_only_hint": False, "destructive_hint": False}, None, False),
            (None, None, False),  # MCP's defaults: destructive, not idempotent
            ({"destructive_hint": True}, "order-7:charge", True),
        ],
    )
    def test_by_the_annotations_or_an_idempotency_key(
        self, hints: dict[str, Any] | None, key: str | None, again: bool
    ) -> None:
        assert may_send_again(hints, key) is again


def in_process_shop(ran: list[str]) -> Any:
    """An in-process MCP server (``mcp.Client(server)``) that notes each execution in ``ran``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    server = MCPServer("shop")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup(order: int) -> dict[str, Any]:
        ran.append("lookup")
        return {"order": order, "paid": True}

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def refund(order: int) -> str:
        ran.append("refund")
        raise ToolError(f"order {order} was never charged")

    return server


class TestARunWhoseCallsAllReplay:
    def test_gets_the_same_tools_and_results_back_without_opening_a_session(self, db: Path) -> None:
        ran: list[str] = []
        server = in_process_shop(ran)

        async def once() -> Any:
            j = Journal("inproc", path=db, run="r")
            async with j, DurableMCP(server, journal=j) as tools:
                listed = await tools.list_tools()
                found = await tools.call_tool("lookup", {"order": 3})
                refused = await tools.call_tool("refund", {"order": 3})
                return listed, found, refused, tools.sessions.opened

        first = asyncio.run(once())
        again = asyncio.run(once())
        assert first[3] == 1 and again[3] == 0  # the replay opened no session
        assert ran == ["lookup", "refund"]
        assert [t.name for t in again[0]] == [t.name for t in first[0]] == ["lookup", "refund"]
        assert again[0][0].annotations is not None and again[0][0].annotations.read_only_hint
        assert (
            again[1].structured_content
            == first[1].structured_content
            == {
                "order": 3,
                "paid": True,
            }
        )
        assert again[2].is_error and again[2].content == first[2].content

    def test_a_call_outside_any_journal_is_a_run_of_its_own_named_by_its_request(
        self, db: Path
    ) -> None:
        ran: list[str] = []
        server = in_process_shop(ran)

        async def outside() -> list[Any]:
            async with DurableMCP(server, path=db) as tools:
                return [
                    await tools.call_tool("lookup", {"order": 1}),
                    await tools.call_tool("lookup", {"order": 2}),
                    await tools.call_tool("lookup", {"order": 1}),  # the same request again
                ]

        first = asyncio.run(outside())
        assert ran == ["lookup", "lookup"]
        assert [r.structured_content for r in first] == [
            {"order": 1, "paid": True},
            {"order": 2, "paid": True},
            {"order": 1, "paid": True},
        ]
        again = asyncio.run(outside())
        assert ran == ["lookup", "lookup"]  # every request replayed: nothing sent
        assert [r.structured_content for r in again] == [r.structured_content for r in first]
        runs = json.loads(lil(db, "runs", "--json").stdout)
        assert sorted(r["state"] for r in runs) == ["completed", "completed"]
        assert all(r["goal"] == "mcp" and r["name"].startswith("lookup.request:") for r in runs)


class TestTheClientsRunOptions:
    def test_a_named_run_holds_every_call_of_the_client_and_replays_whenever_asked(
        self, db: Path
    ) -> None:
        ran: list[str] = []
        server = in_process_shop(ran)

        async def calls(**options: Any) -> list[Any]:
            async with DurableMCP(server, path=db, **options) as tools:
                return [
                    (await tools.call_tool("lookup", {"order": n})).structured_content
                    for n in (1, 1)
                ]

        assert asyncio.run(calls(run="order-1")) == [{"order": 1, "paid": True}] * 2
        assert ran == ["lookup", "lookup"]  # one run: two calls of it (mcp:lookup, #2)
        assert asyncio.run(calls(run="order-1")) == [{"order": 1, "paid": True}] * 2
        assert ran == ["lookup", "lookup"]
        runs = json.loads(lil(db, "runs", "--json").stdout)
        assert [(r["name"], r["state"]) for r in runs] == [("order-1", "completed")]

    def test_other_arguments_at_a_recorded_place_of_a_named_run_are_refused_with_the_ways_out(
        self, db: Path
    ) -> None:
        from letitloop.errors import StepMismatchError

        ran: list[str] = []
        server = in_process_shop(ran)

        async def call(order: int) -> Any:
            async with Journal("checkout", path=db, run="r"), DurableMCP(server) as tools:
                return await tools.call_tool("lookup", {"order": order})

        asyncio.run(call(1))
        with pytest.raises(StepMismatchError) as refused:
            asyncio.run(call(2))
        said = str(refused.value)
        assert "'mcp:lookup'" in said and '"order": 2' in said and "arguments differ" in said
        assert "run='...'" in said and "lil reset checkout --run" in said and "lil fork" in said
        assert ran == ["lookup"]  # nothing sent for the refused call

    def test_a_named_run_left_by_an_exception_is_failed_and_resumed_next_time(
        self, db: Path
    ) -> None:
        ran: list[str] = []
        server = in_process_shop(ran)

        async def calls(fail: bool) -> Any:
            async with DurableMCP(server, path=db, run="order-5") as tools:
                first = await tools.call_tool("lookup", {"order": 5})
                if fail:
                    raise RuntimeError("the program failed after the call")
                return first.structured_content

        with pytest.raises(RuntimeError):
            asyncio.run(calls(fail=True))
        assert [r["state"] for r in json.loads(lil(db, "runs", "--json").stdout)] == ["failed"]
        assert asyncio.run(calls(fail=False)) == {"order": 5, "paid": True}
        assert ran == ["lookup"]  # resumed: the call that returned was replayed

    def test_fresh_sends_a_completed_request_again(self, db: Path) -> None:
        ran: list[str] = []
        server = in_process_shop(ran)

        async def call(**options: Any) -> Any:
            async with DurableMCP(server, path=db, **options) as tools:
                return (await tools.call_tool("lookup", {"order": 3})).structured_content

        assert asyncio.run(call()) == asyncio.run(call()) == {"order": 3, "paid": True}
        assert ran == ["lookup"]
        assert asyncio.run(call(fresh=True)) == {"order": 3, "paid": True}
        assert ran == ["lookup", "lookup"]


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A journal location of each store: a SQLite file, memory://, PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "journal.db")
    if request.param == "memory":
        return f"memory://mcp-{tmp_path.name}"
    import pg_server

    return pg_server.location()


class TestARequestOnEveryStore:
    def test_is_its_own_run_replayed_once_completed_and_sent_again_when_fresh(
        self, store: str
    ) -> None:
        ran: list[str] = []
        server = in_process_shop(ran)

        async def call(**options: Any) -> Any:
            async with DurableMCP(server, path=store, **options) as tools:
                return (await tools.call_tool("lookup", {"order": 9})).structured_content

        assert asyncio.run(call()) == asyncio.run(call()) == {"order": 9, "paid": True}
        assert ran == ["lookup"]
        asyncio.run(call(fresh=True))
        assert ran == ["lookup", "lookup"]
        with Journal("mcp", run=f"lookup.request:{request_digest()}", path=store) as j:
            assert j.was_completed and j.generation is not None


def request_digest() -> str:
    """The digest naming the run of ``lookup`` with ``{"order": 9}`` (agentcalls.request_run)."""
    from letitloop.adapters.agentcalls import request_run

    name = request_run("lookup", {"tool": "lookup", "arguments": {"order": 9}})
    return name.split(":", 1)[1]


class TestAFailedCall:
    def test_records_the_error_inside_the_sdks_exception_groups(self, shop: Shop, db: Path) -> None:
        import sqlite3

        shop.refuse.touch()  # the server exits at start: the SDK raises nested task groups

        async def attempt() -> None:
            async with Journal("down", path=db, run="r"), DurableMCP(shop.params()) as tools:
                await tools.call_tool("lookup", {"order": 1})

        with pytest.raises(BaseException) as raised:
            asyncio.run(attempt())
        assert "sub-exception" in str(raised.value)  # what the SDK raised: a group
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT key, error FROM journal_down ORDER BY key").fetchall()
            run = conn.execute("SELECT error FROM runs").fetchall()
        assert rows == [
            ("mcp:lookup", "MCPError: Connection closed"),
            ("mcp:lookup/sent", "MCPError: Connection closed"),
        ]
        assert run == [("MCPError: Connection closed",)]


ROOT = Path(__file__).resolve().parent.parent


class TestTheDocsExample:
    def test_runs_as_pasted_in_the_clone_against_its_shop_server_and_replays(
        self, tmp_path: Path, db: Path, mcp_sdk: Preloaded
    ) -> None:
        """docs/mcp.md's DurableMCP program, as printed, from the clone's root (where its
        examples/shop_server.py is), run twice (``python checkout.py``, each a child forked
        from the interpreter that imported the MCP SDK): the second run replays both calls."""
        from test_readme import blocks

        page = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
        (code,) = [b for b in blocks("python", page) if "DurableMCP(shop" in b]
        assert 'args=["examples/shop_server.py"]' in code
        script = tmp_path / "checkout.py"
        script.write_text(code, encoding="utf-8")
        env = {**os.environ, "LETITLOOP_DB": str(db)}
        runs = [mcp_sdk.run(script, cwd=ROOT, env=env) for _ in range(2)]
        for r in runs:
            assert r.returncode == 0, r.stderr
            assert r.stdout == "order 7 is open charged order 7\n"
        import sqlite3

        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT key, status, attempt FROM journal_checkout").fetchall()
            run = conn.execute("SELECT name, status, attempts FROM runs").fetchall()
        assert sorted(rows) == [  # every call's row still the first attempt's: none re-ran
            ("mcp:charge", "done", 1),
            ("mcp:charge/sent", "done", 1),
            ("mcp:lookup", "done", 1),
            ("mcp:lookup/sent", "done", 1),
        ]
        assert run == [("order-7", "completed", 1)]  # the second run only replayed it


@pytest.fixture
def example_servers(shop_servers: StdioServers, monkeypatch: pytest.MonkeyPatch) -> None:
    """The crash test's runs of docs/mcp.md's program start examples/shop_server.py forked
    from :func:`shop_servers`'s interpreter (tests/crashtest_examples.py's driver)."""
    python = shop_servers.command()
    monkeypatch.setenv("SHOP_SERVER_PYTHON", json.dumps(python))


#: Its trials are a dozen programs run one after another: minutes on a loaded machine.
@pytest.mark.timeout(900)
class TestTheCrashTest:
    def test_the_docs_program_killed_at_three_seeded_points_sends_nothing_twice(
        self, example_servers: None
    ) -> None:
        """lil crashtest's machinery on docs/mcp.md's DurableMCP program against
        examples/shop_server.py (tests/crashtest_examples.py drives it): killed with SIGKILL
        at three of its kill points, rerun until it finishes: no recorded call was sent
        again, and each finished run printed what the uninterrupted one did."""
        report = crashtest_example("shop_server")
        assert report.expected == "order 7 is open charged order 7\n"

    def test_killed_after_charge_returned_the_driver_decides_from_the_shops_record(
        self, tmp_path: Path, example_servers: None
    ) -> None:
        """Killed after ``charge`` returned and before its record (the crash test's kill
        point ``end`` at ``/2``, the second step at the top), the driver's rerun finds the
        call in doubt (exit status 75), finds the charge in the shop's record, sends what it
        returned as the call's result and runs the program again: it finishes as the
        uninterrupted run did, and the shop charged once."""
        import sqlite3

        from crashtest_examples import BY_NAME, example_program

        journal = str(tmp_path / "journal.db")
        with Preloaded(*BY_NAME["shop_server"].preload) as preloaded:
            program = example_program("shop_server", preloaded)
            killed = program.run(tmp_path, journal, 0, kill="end\t/2")
            assert (killed.status, killed.events[-1]) == (1, ("kill", "end", "/2", ""))
            assert (tmp_path / "charges.log").read_text("utf-8") == "charged order 7\n"
            rerun = program.run(tmp_path, journal, 1)
        assert (rerun.status, rerun.stdout) == (0, "order 7 is open charged order 7\n")
        assert (tmp_path / "charges.log").read_text("utf-8") == "charged order 7\n"
        with sqlite3.connect(journal) as conn:
            rows = conn.execute(
                "SELECT key, status, result FROM journal_checkout WHERE key LIKE 'mcp:charge%'"
            ).fetchall()
            run = conn.execute("SELECT name, status FROM runs").fetchall()
        assert sorted((key, status) for key, status, _ in rows) == [
            ("mcp:charge", "done"),
            ("mcp:charge/decision", "done"),
            ("mcp:charge/sent", "done"),  # recorded once: it was not sent again
        ]
        decision = next(json.loads(r) for k, _, r in rows if k == "mcp:charge/decision")
        assert decision == {"result": "charged order 7"}
        assert run == [("order-7", "completed")]
