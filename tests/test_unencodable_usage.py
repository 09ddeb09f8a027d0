"""A step whose paid call ran but whose result cannot be encoded keeps the usage it reported.

The usual case: ``usage(reply)`` then ``return reply``, with ``reply`` an SDK's
response object (a Pydantic model the codec does not know). The error says
what to return instead; the step is recorded failed with its usage, so the
money spent is counted, and it runs again on the next attempt.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pydantic
import pytest
from helpers import lil_forked

from letitloop import Journal, usage
from letitloop.errors import EncodeError


class Reply(pydantic.BaseModel):  # an SDK's response, as OpenAI's and Anthropic's are
    text: str
    input_tokens: int
    output_tokens: int


@dataclasses.dataclass
class Point:
    x: int


def ask(prompt: str) -> Reply:
    reply = Reply(text=f"about {prompt}", input_tokens=1200, output_tokens=300)
    usage(reply, cost=0.004, model="m")
    return reply


def rows(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT key, status, input_tokens, output_tokens, cost, model, error FROM journal_g"
        ).fetchall()


class TestAStepThatReturnsAnUnregisteredModel:
    def test_the_error_says_to_return_model_dump_or_register_the_class(
        self, tmp_path: Path
    ) -> None:
        with pytest.raises(EncodeError) as caught, Journal("g", path=tmp_path / "j.db") as j:
            j.step("ask", ask, "x")
        text = str(caught.value)
        assert "letitloop.codec.register(Reply)" in text
        assert "value.model_dump()" in text

    def test_its_usage_is_kept_on_its_failed_try_and_counted(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        with (
            pytest.raises(EncodeError, match="with the usage it reported"),
            Journal("g", path=db) as j,
        ):
            j.step("ask", ask, "x")
        # The call is a failed try (as a retry policy's last is), which keeps its usage;
        # the failed row says how the step stands, and counts nothing twice.
        ((key, status, inp, outp, cost, model, error),) = rows(db)
        assert (key, status, inp, outp, cost, model) == ("ask", "failed", None, None, None, None)
        assert str(error).startswith("EncodeError: step 'ask'")
        with sqlite3.connect(db) as conn:
            tries = conn.execute(
                "SELECT key, input_tokens, output_tokens, cost, model, error FROM step_tries"
            ).fetchall()
        assert [t[:5] for t in tries] == [("ask", 1200, 300, 0.004, "m")]
        assert str(tries[0][5]).startswith("EncodeError: step 'ask'")
        shown = lil_forked("--db", str(db), "show", "g").stdout
        assert "1,500 tokens (1,200 in, 300 out), $0.0040 reported by 1 step" in shown

    def test_the_next_attempt_runs_it_again(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        with pytest.raises(EncodeError), Journal("g", path=db) as j:
            j.step("ask", ask, "x")
        with Journal("g", path=db) as j:
            assert j.step("ask", lambda p: ask(p).text, "x") == "about x"
        assert rows(db)[0][1] == "done"


class TestAStepThatReportedNothing:
    def test_nothing_is_written_and_a_dataclass_gets_asdict_advice(self, tmp_path: Path) -> None:
        db = tmp_path / "j.db"
        with pytest.raises(EncodeError) as caught, Journal("g", path=db) as j:
            j.step("point", Point, 1)
        assert "dataclasses.asdict(value)" in str(caught.value)
        assert "nothing was recorded" in str(caught.value)
        assert rows(db) == []
