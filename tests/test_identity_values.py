"""Identity by value, in real processes: never another call's run or result because of a value.

Each scenario runs the user's program in child interpreters, SIGKILLed where
a crash is the point, and counts the side effects (charges, calls) in a file
written by the step functions, outside the journal.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from helpers import run_forked, write_script

PAY = """
    import json, os, signal, sys
    from letitloop import durable, step

    db, charges, kill_after, *ids = sys.argv[1:]
    amounts = {1: 10, 2: 99}

    def charge(order):
        with open(charges, "a") as f:
            f.write(json.dumps([order["id"], order["amount"]]) + "\\n")
        return f"receipt {order['id']} for {order['amount']}"

    @durable(goal_id="pay", path=db)
    def pay(order):
        receipt = step("charge", charge, order)
        if kill_after == "charge":
            os.kill(os.getpid(), signal.SIGKILL)  # dies after the charge returned
        return receipt

    for i in map(int, ids):
        print(pay({"id": 2**100 + i, "amount": amounts[i]}), flush=True)
"""


def charges(path: Path) -> list[list[int]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class TestOrdersWhoseIdsAreBeyond64Bits:
    def test_a_second_order_is_charged_not_handed_the_first_ones_receipt(
        self, tmp_path: Path
    ) -> None:
        script = write_script(tmp_path, "pay.py", PAY)
        db, side = tmp_path / "journal.db", tmp_path / "charges.jsonl"
        killed = run_forked(script, str(db), str(side), "charge", "1")
        assert killed.returncode == -signal.SIGKILL
        done = run_forked(script, str(db), str(side), "no", "2")
        assert done.returncode == 0, done.stderr
        assert done.stdout.split("\n")[0] == f"receipt {2**100 + 2} for 99"
        assert charges(side) == [[2**100 + 1, 10], [2**100 + 2, 99]]

    def test_a_loop_met_in_the_other_order_charges_each_customer_once(self, tmp_path: Path) -> None:
        script = write_script(tmp_path, "pay.py", PAY)
        db, side = tmp_path / "journal.db", tmp_path / "charges.jsonl"
        killed = run_forked(script, str(db), str(side), "charge", "1", "2")
        assert killed.returncode == -signal.SIGKILL
        done = run_forked(script, str(db), str(side), "no", "2", "1")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            f"receipt {2**100 + 2} for 99",
            f"receipt {2**100 + 1} for 10",  # replayed from the killed run
        ]
        assert sorted(map(tuple, charges(side))) == [(2**100 + 1, 10), (2**100 + 2, 99)]


TRAIN = """
    import json, os, signal, sys
    import numpy as np
    from letitloop import durable, step

    db, calls, kill, first = sys.argv[1:]

    def fit(weights):
        with open(calls, "a") as f:
            f.write(json.dumps(weights.tolist()) + "\\n")
        return float(weights.sum())

    @durable(goal_id="train", path=db)
    def train(weights):
        score = step("fit", fit, weights)
        if kill == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        return score

    print(train(np.array([1.0, 2.0]) if first == "a" else np.array([1.0, 3.0])), flush=True)
"""


class TestArraysAsArguments:
    def test_another_array_starts_its_own_run_after_a_sigkill(self, tmp_path: Path) -> None:
        pytest.importorskip("numpy")
        script = write_script(tmp_path, "train.py", TRAIN)
        db, calls = tmp_path / "journal.db", tmp_path / "calls.jsonl"
        killed = run_forked(script, str(db), str(calls), "kill", "a")
        assert killed.returncode == -signal.SIGKILL
        done = run_forked(script, str(db), str(calls), "no", "b")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "4.0"  # its own fit, not 3.0 replayed
        again = run_forked(script, str(db), str(calls), "no", "a")
        assert again.stdout.strip() == "3.0"  # the killed run resumed: fit replayed
        assert calls.read_text().splitlines() == ["[1.0, 2.0]", "[1.0, 3.0]"]


CLIENT = """
    import sys
    from letitloop import durable, register_fingerprint, step

    db, calls, how, url = sys.argv[1:]

    class Client:
        def __init__(self, url):
            self.url = url

    if how == "registered":
        register_fingerprint(Client, lambda c: c.url)

    def get(client):
        with open(calls, "a") as f:
            f.write(client.url + "\\n")
        return client.url

    @durable(goal_id="fetch", path=db)
    def fetch(client):
        return step("get", get, client)

    try:
        print(fetch(Client(url)), flush=True)
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}", flush=True)
"""


class TestAnArgumentWithNoWayToTellItApart:
    def test_it_is_refused_with_the_way_out_and_nothing_runs(self, tmp_path: Path) -> None:
        script = write_script(tmp_path, "client.py", CLIENT)
        db, calls = tmp_path / "journal.db", tmp_path / "calls.txt"
        done = run_forked(script, str(db), str(calls), "plain", "https://a")
        assert done.stdout.startswith("FingerprintError: the run's input holds at $.client a ")
        assert "register_fingerprint(Client, fn)" in done.stdout
        assert not calls.exists()

    def test_a_registered_fingerprint_tells_two_clients_apart(self, tmp_path: Path) -> None:
        script = write_script(tmp_path, "client.py", CLIENT)
        db, calls = tmp_path / "journal.db", tmp_path / "calls.txt"
        for url in ("https://a", "https://b"):
            done = run_forked(script, str(db), str(calls), "registered", url)
            assert done.stdout.strip() == url, done.stderr
        assert calls.read_text().splitlines() == ["https://a", "https://b"]


ASK = """
    import json, os, signal, sys, time
    from letitloop import Journal, unchecked

    db, calls, kill = sys.argv[1:]

    def llm(messages):
        with open(calls, "a") as f:
            f.write(json.dumps(messages) + "\\n")
        return "answer"

    with Journal("chat", path=db) as j:
        messages = [{"role": "system", "content": unchecked(f"now {time.time_ns()}")},
                    {"role": "user", "content": "hi"}]
        print(j.step("ask", llm, messages), flush=True)
        if kill == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
"""


class TestUncheckedInsideAMessageList:
    def test_the_model_gets_plain_messages_and_the_call_replays_after_a_sigkill(
        self, tmp_path: Path
    ) -> None:
        script = write_script(tmp_path, "ask.py", ASK)
        db, calls = tmp_path / "journal.db", tmp_path / "calls.jsonl"
        killed = run_forked(script, str(db), str(calls), "kill")
        assert killed.returncode == -signal.SIGKILL
        done = run_forked(script, str(db), str(calls), "no")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "answer"
        (sent,) = [json.loads(line) for line in calls.read_text().splitlines()]  # called once
        assert sent[0]["content"].startswith("now ")
        assert sent[1] == {"role": "user", "content": "hi"}
