"""``lil crashtest``: a program killed at every step and rerun shows what ran twice.

Each test runs the real ``lil`` as a subprocess on a small program written to
a temporary folder; lil runs that program in real child processes that
SIGKILL themselves at each kill point (letitloop/run/crashhook.py).

Each run of the program lil starts is a relay (tests/forked_commands.py) whose
program runs in a child forked from an interpreter that imported letitloop once
(its ``hooked``): a fresh one spends about 80 ms of CPU on the import, and a test's
crash test runs the program a dozen times. TestTheDocs runs the docs' command as
typed: the real entry point, each run of the program a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from forked_commands import ForkedCommands
from helpers import lil_forked
from preloaded import Preloaded

HEADER = """\
import time
import letitloop

def double(i):
    return i * 2

def send(total):
    with open("sent.log", "a") as log:
        log.write(f"sent {total}\\n")
    return total
"""

#: Steps, and a send guarded by a marker: nothing runs twice.
CAREFUL = (
    HEADER
    + """
@letitloop.durable(goal_id="careful")
def pipeline():
    total = letitloop.step("first", double, 1) + letitloop.step("second", double, 2)
    with letitloop.atomic_marker("send") as should_send:
        if should_send:
            send(total)
    return total

print(pipeline())
"""
)

#: The same with async steps gathered on one loop and an ``async with`` marker.
CAREFUL_ASYNC = """\
import asyncio
import letitloop

async def double(i):
    await asyncio.sleep(0)
    return i * 2

def triple(i):
    return i * 3

@letitloop.durable_async(goal_id="careful")
async def pipeline():
    first, second = await asyncio.gather(
        letitloop.async_step("first", double, 1), letitloop.async_step("second", triple, 2)
    )
    async with letitloop.atomic_marker("send") as should_send:
        if should_send:
            with open("sent.log", "a") as log:
                log.write(f"sent {first + second}\\n")
    return first + second

print(asyncio.run(pipeline()))
"""

#: Two runs of one goal in one process, each with a step named 'model'.
TWO_RUNS = (
    HEADER
    + """
for name in ("x", "y"):
    with letitloop.Journal("agent", run=name) as j:
        print(j.step("model", double, 1))
"""
)

#: The work runs in a child the program waits for; the program exits 0 whatever the child did.
PARENT = """\
import subprocess, sys
subprocess.run([sys.executable, "-c", "import letitloop\\n"
                "with letitloop.Journal('kid') as j: j.step('first', abs, -1)"])
print("done")
"""

#: The send happens before the steps, outside any step: every rerun sends again.
OUTSIDE = (
    HEADER
    + """
@letitloop.durable(goal_id="outside")
def pipeline():
    send(0)
    return letitloop.step("first", double, 1) + letitloop.step("second", double, 2)

print(pipeline())
"""
)

#: The step's key holds the time: a rerun does not find its record, and calls it again.
TIMED = (
    HEADER
    + """
@letitloop.durable(goal_id="timed")
def pipeline():
    first = letitloop.step(f"first-{time.time_ns()}", double, 1)
    return first + letitloop.step("second", double, 2)

print(pipeline())
"""
)

#: A run named anew by each process: a rerun does not resume the killed run, it starts
#: one of its own and runs every step again (no body ran twice in its own run).
RESTARTING = (
    HEADER
    + """
import os

with letitloop.Journal("restarting", run=f"process-{os.getpid()}") as j:
    print(j.step("first", double, 1) + j.step("second", double, 2))
"""
)

#: Numbered ticks, as LlamaIndex's workflow keys its steps: a rerun restores the ticks
#: before its snapshot without calling them, replays the last, and records that it
#: resumed under the next number, so its later ticks are numbered one more and take
#: other places: nothing ran again.
SHIFTING = (
    HEADER
    + """
import os

with letitloop.Journal("ticks", run="one") as j:
    done = int(open("snapshot").read()) if os.path.exists("snapshot") else 0
    shift = 0
    if done:
        j.step(f"{done - 1:05}:tick", double, done - 1)  # replayed
        j.step(f"{done:05}:resumed", double, -1)
        shift = 1
    for i in range(done, 3):
        j.step(f"{i + shift:05}:tick", double, i)
        with open("snapshot.tmp", "w") as f:
            f.write(str(i + 1))
        os.replace("snapshot.tmp", "snapshot")
print("three ticks")
"""
)

#: The tool appends inside a step with no marker: killed after it, before the step's
#: record, the rerun appends again.
UNMARKED = (
    HEADER
    + """
@letitloop.durable(goal_id="unmarked")
def pipeline():
    total = letitloop.step("first", double, 1)
    return letitloop.step("send", send, total)

print(pipeline())
"""
)


PAID_HEADER = """\
import os
import time
import letitloop

def ask(question):  # a paid model call: it reports what it cost
    letitloop.usage(input_tokens=100, output_tokens=20, cost=0.5, model="m")
    return question.upper()
"""

#: A paid call in a step, its usage reported in the step's function: paid once.
PAID = (
    PAID_HEADER
    + """
@letitloop.durable(goal_id="paid")
def pipeline():
    answer = letitloop.step("ask", ask, "hi")
    return letitloop.step("answer", len, answer)

print(pipeline())
"""
)

#: The paid step's key holds the time: a rerun pays for it again under another key.
PAID_TIMED = (
    PAID_HEADER
    + """
@letitloop.durable(goal_id="paid")
def pipeline():
    answer = letitloop.step(f"ask-{time.time_ns()}", ask, "hi")
    return letitloop.step("answer", len, answer)

print(pipeline())
"""
)

#: A run named anew by each process: the usage goes to a record no rerun reads, and
#: the rerun (another run, the same step names) pays again.
PAID_ELSEWHERE = (
    PAID_HEADER
    + """
with letitloop.Journal("paid", run=f"process-{os.getpid()}") as j:
    answer = j.step("ask", ask, "hi")
    print(j.step("answer", len, answer))
"""
)

#: The same, its journal at a path of its own (``path=``), not ``$LETITLOOP_DB``.
PAID_ELSEWHERE_AT_A_PATH = PAID_ELSEWHERE.replace(
    'Journal("paid", ', 'Journal("paid", path=".letitloop/kept.db", '
)

#: Each node a run of its own, and a checkpoint file of the finished nodes, as LangGraph
#: keeps them: a rerun skips a finished node without calling it, so the next node's paid
#: step takes the place the skipped one had (another run's 'model'): not paid again.
PAID_SKIPPING = (
    PAID_HEADER
    + """
import json

done = json.load(open("checkpoint.json")) if os.path.exists("checkpoint.json") else {}
for node in ("a", "b", "c"):
    if node in done:
        continue  # its checkpoint holds it: not called again
    with letitloop.Journal("node", run=f"node-{node}") as j:
        done[node] = j.step("model", ask, node)
    with open("checkpoint.tmp", "w") as f:
        json.dump(done, f)
    os.replace("checkpoint.tmp", "checkpoint.json")
print(done)
"""
)


#: The command lil crashtest runs for ``python`` (:func:`relayed`).
PYTHON: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def relayed() -> Iterator[None]:
    """:data:`PYTHON`: a relay whose program runs in a child forked from an interpreter that
    imported letitloop (tests/forked_commands.py's ``hooked``)."""
    with (
        Preloaded("letitloop", with_letitloop=True) as forker,
        ForkedCommands(forker, hooked=True) as forked,
    ):
        PYTHON[:] = forked.command([])
        yield
    PYTHON.clear()


def crashtest(
    folder: Path, program: str, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``lil crashtest [options] -- python prog.py`` in ``folder`` (with ``env`` added to
    the environment): ``lil`` in a child forked from an interpreter that imported letitloop
    (tests/helpers.py; the docs' test runs the real entry point), and each run of the
    program, as ``lil crashtest`` starts it, ``python prog.py`` relayed to a forked child
    (:data:`PYTHON`)."""
    (folder / "prog.py").write_text(program)
    return lil_forked(
        "crashtest", *options, "--", *PYTHON, "prog.py",
        cwd=folder, env={**os.environ, **(env or {})},
    )  # fmt: skip


class TestACarefulProgram:
    def test_it_passes_with_no_repeat_and_prints_its_cost(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, CAREFUL, "--effects", "sent.log")
        assert done.returncode == 0, done.stdout + done.stderr
        # Two steps (three points each) and the marker's start: seven points, all tried.
        assert "kill points: 7 tried of 7" in done.stdout
        assert "repeats: 0" in done.stdout
        assert " s\n" in done.stdout.splitlines()[1] + "\n"  # its wall time
        # Its own folder was left as it was: every trial ran in a folder of its own.
        assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.py"]

    def test_its_async_twin_passes_too(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, CAREFUL_ASYNC, "--effects", "sent.log")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "kill points: 7 tried of 7" in done.stdout
        assert "repeats: 0" in done.stdout

    def test_two_runs_with_the_same_step_names_are_told_apart(self, tmp_path: Path) -> None:
        # Each run has its own keys: 'model' committed in run x is not run y's 'model'.
        done = crashtest(tmp_path, TWO_RUNS, "--max-kills", "4")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "kill points: 4 tried of 6" in done.stdout
        assert "repeats: 0" in done.stdout

    def test_work_in_a_child_process_is_killed_there_and_rerun(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, PARENT)
        assert done.returncode == 0, done.stdout + done.stderr
        # Reached in the child, though the command exited 0: each kill is rerun once.
        assert "kill points: 3 tried of 3, 3 reruns" in done.stdout
        assert "other problems" not in done.stdout


class TestABrokenProgram:
    def test_a_side_effect_outside_any_step_is_a_repeat(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, OUTSIDE, "--effects", "sent.log", "--max-kills", "2")
        assert done.returncode == 1, done.stdout + done.stderr
        assert "kill points: 2 tried of 6" in done.stdout
        assert "killed before step 'first': side effect 'sent 0' happened 2 times" in done.stdout

    def test_a_step_whose_key_holds_the_time_is_a_repeat_at_its_place(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, TIMED, "--max-kills", "4")
        assert done.returncode == 1, done.stdout + done.stderr
        # Killed before the second step (the fourth point; the first committed): the first
        # runs again.
        assert "killed before step 'second': step at /1 ran again" in done.stdout
        assert "the key changed between runs" in done.stdout

    def test_a_rerun_whose_steps_take_other_places_runs_nothing_again(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, SHIFTING)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "kill points: 9 tried of 9" in done.stdout
        assert "repeats: 0" in done.stdout

    def test_a_rerun_that_starts_a_run_of_its_own_is_a_repeat(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, RESTARTING, "--max-kills", "4")
        assert done.returncode == 1, done.stdout + done.stderr
        # Killed before 'second' (its 'first' committed): the rerun ran 'first' again.
        assert (
            "  killed before step 'second': step 'first' ran and was committed 2 times "
            "(reference: 1): a rerun ran it again in another run instead of resuming the "
            "one that recorded it"
        ) in done.stdout
        assert "repeats: 1\n" in done.stdout  # killed earlier, nothing was committed

    def test_a_tool_that_appends_without_a_marker_is_a_repeat(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, UNMARKED, "--effects", "sent.log")
        assert done.returncode == 1, done.stdout + done.stderr
        assert (
            "killed after step 'send' returned, before its record: side effect 'sent 2' "
            "happened 2 times (reference: 1)" in done.stdout
        )
        assert "repeats: 1\n" in done.stdout  # that one place only


class TestTheDocs:
    def test_the_broken_tool_of_the_docs_is_reported_as_the_docs_say(self, tmp_path: Path) -> None:
        page = (Path(__file__).parent.parent / "docs" / "crashtest.md").read_text()
        start = page.index("```python\n# bills.py") + len("```python\n")
        program = page[start : page.index("```", start)]
        console = page[page.index("$ lil crashtest --effects sent.log -- python bills.py") :]
        shown = console[: console.index("```")].splitlines()
        (tmp_path / "prog.py").write_text(program)
        done = subprocess.run(  # the real entry point, as the docs type it
            [sys.executable, "-m", "letitloop", "crashtest", "--effects", "sent.log", "--",
             sys.executable, "prog.py"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == "crashtest: " + " ".join([sys.executable, "prog.py"])
        assert lines[1].startswith("kill points: 6 tried of 6, 6 reruns, ")
        assert lines[2:] == shown[3:]


class TestTheOrder:
    def test_a_random_order_with_a_seed_tries_the_same_points(self, tmp_path: Path) -> None:
        options = ("--order", "random", "--seed", "3", "--max-kills", "2", "--effects", "sent.log")
        first = crashtest(tmp_path, OUTSIDE, *options)
        second = crashtest(tmp_path, OUTSIDE, *options)
        assert first.returncode == second.returncode == 1

        def kills(out: str) -> list[str]:
            return [line for line in out.splitlines() if "killed" in line]

        assert kills(first.stdout) == kills(second.stdout)


#: Prints its process id (differs every run), then its result.
TALKATIVE = (
    HEADER
    + """
import os

@letitloop.durable(goal_id="talkative")
def pipeline():
    print("process", os.getpid())
    return letitloop.step("first", double, 1)

print(pipeline())
"""
)


class TestTheOutput:
    def test_a_finished_run_that_prints_otherwise_is_reported(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, TALKATIVE, "--max-kills", "1")
        assert done.returncode == 1, done.stdout + done.stderr
        assert "repeats: 0" in done.stdout
        assert "killed before step 'first': the finished program's output (exact) differs" in (
            done.stdout
        )

    def test_last_line_compares_only_the_result(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, TALKATIVE, "--max-kills", "1", "--output", "last-line")
        assert done.returncode == 0, done.stdout + done.stderr

    def test_match_compares_only_the_lines_it_matches(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, TALKATIVE, "--max-kills", "1", "--output", "match:^[0-9]+$")
        assert done.returncode == 0, done.stdout + done.stderr
        done = crashtest(tmp_path, TALKATIVE, "--max-kills", "1", "--output", "match:^process")
        assert done.returncode == 1, done.stdout + done.stderr
        assert "the finished program's output (match:^process) differs" in done.stdout

    def test_an_output_it_does_not_know_is_refused_in_one_line(self, tmp_path: Path) -> None:
        for output, said in (("match:(", "does not compile"), ("all", "expected exact")):
            done = crashtest(tmp_path, TALKATIVE, "--output", output)
            assert done.returncode == 1
            assert said in done.stderr and "Traceback" not in done.stderr, done.stderr


class TestBadInput:
    def test_a_program_with_no_step_is_refused_in_one_line(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, "print('hello')\n")
        assert done.returncode == 1
        assert "ran no letitloop step" in done.stderr
        assert "Traceback" not in done.stderr


class TestTheCommand:
    def test_it_is_in_lil_help(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "letitloop", "--help"], capture_output=True, text=True
        )
        assert "crashtest" in done.stdout


class TestPaidCalls:
    def test_a_call_in_flight_at_the_kill_is_paid_again_and_allowed(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, PAID)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "repeats: 0" in done.stdout
        # Killed after 'ask' reported its call and returned, before its record: the
        # journal kept that call as a crashed try, and the rerun paid it again.
        assert done.stdout.count("in flight, paid again (allowed): 1\n") == 1
        assert (
            "  killed after step 'ask' returned, before its record: step 'ask' in flight at "
            "the kill, paid again (allowed): 200 tokens in, 40 out, cost 1 in all"
        ) in done.stdout

    def test_a_paid_step_whose_key_changes_is_paid_again_at_its_place(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, PAID_TIMED, "--max-kills", "4")
        assert done.returncode == 1, done.stdout + done.stderr
        lines = [line for line in done.stdout.splitlines() if "paid call" in line]
        # Killed before 'answer' (index 3): 'ask' was committed, and paid again.
        assert len(lines) == 1, done.stdout
        assert lines[0].startswith("  killed before step 'answer': paid call at /1 paid again")
        assert "(100 tokens in, 20 out, cost 0.5), then 'ask-" in lines[0]
        assert lines[0].endswith(" recorded 100 tokens in, 20 out, cost 0.5")
        # Killed after its call returned, before its record: in flight, paid again under
        # its new key, as the contract allows.
        assert "in flight, paid again (allowed): 1\n" in done.stdout
        assert (
            "returned, before its record: step at /1 in flight at the kill as 'ask-" in done.stdout
        )
        assert "(100 tokens in, 20 out, cost 0.5) (allowed)" in done.stdout

    def test_usage_recorded_where_no_rerun_reads_it_is_a_repeat(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, PAID_ELSEWHERE, "--max-kills", "4")
        assert done.returncode == 1, done.stdout + done.stderr
        # No step body ran again in its own run: only the usage records tell.
        assert "ran again" not in done.stdout
        assert (
            "  killed before step 'answer': paid call at /1 paid again: its step was committed "
            "as 'ask' (100 tokens in, 20 out, cost 0.5), then 'ask' of another run recorded "
            "100 tokens in, 20 out, cost 0.5"
        ) in done.stdout

    def test_usage_is_read_from_the_journal_the_program_named(self, tmp_path: Path) -> None:
        # path= in the program: each run's usage is read where its journal was kept.
        done = crashtest(tmp_path, PAID_ELSEWHERE_AT_A_PATH, "--max-kills", "4")
        assert done.returncode == 1, done.stdout + done.stderr
        assert (
            "  killed before step 'answer': paid call at /1 paid again: its step was committed "
            "as 'ask' (100 tokens in, 20 out, cost 0.5), then 'ask' of another run recorded "
            "100 tokens in, 20 out, cost 0.5"
        ) in done.stdout

    def test_a_rerun_that_skips_finished_work_pays_nothing_again(self, tmp_path: Path) -> None:
        done = crashtest(tmp_path, PAID_SKIPPING)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "kill points: 9 tried of 9" in done.stdout
        assert "repeats: 0" in done.stdout


class TestOnPostgreSQL:
    def test_each_trial_has_a_fresh_schema_its_usage_read_there_and_dropped_after(
        self, tmp_path: Path
    ) -> None:
        import pg_server
        import psycopg

        location = pg_server.location()
        # Its first three points: before 'ask', at its start, after it returned (in flight).
        done = crashtest(tmp_path, PAID, "--max-kills", "3", env={"LETITLOOP_DB": location})
        assert done.returncode == 0, done.stdout + done.stderr
        assert "kill points: 3 tried of 6" in done.stdout
        assert "repeats: 0" in done.stdout
        # The call in flight at the kill was read from the trial's schema's tries.
        assert (
            "step 'ask' in flight at the kill, paid again (allowed): "
            "200 tokens in, 40 out, cost 1 in all"
        ) in done.stdout
        with psycopg.connect(pg_server.server_url(), autocommit=True) as conn:
            left = conn.execute(
                "SELECT count(*) FROM information_schema.schemata "
                "WHERE schema_name LIKE 'lil_crashtest_%'"
            ).fetchone()
            given = location.rsplit("search_path%3D", 1)[1]
            tables = conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (given,)
            ).fetchone()
        assert left == (0,)  # each trial's schema was dropped with its tables
        assert tables == (0,)  # and no trial wrote in the schema LETITLOOP_DB names

    def test_a_paid_step_whose_key_changes_is_found_there_too(self, tmp_path: Path) -> None:
        import pg_server

        done = crashtest(
            tmp_path, PAID_TIMED, "--max-kills", "4", env={"LETITLOOP_DB": pg_server.location()}
        )
        assert done.returncode == 1, done.stdout + done.stderr
        assert "  killed before step 'answer': paid call at /1 paid again" in done.stdout
