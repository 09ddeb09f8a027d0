"""The first mistakes a new user makes get one clear line, where they are made.

A bare ``@durable``, ``@durable(goal=...)``, a step given a value instead of a
function, ``set_result`` on a completed run: each either does the right
thing or raises ``MisuseError`` (a ``LetItLoopError`` and a ``TypeError``)
saying what to write instead, before anything is written. A step whose name
was forgotten (``j.step(fetch, 1)``) raises ``InvalidNameError`` showing the
call with its name.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from letitloop import Journal, async_step, durable, durable_async, step
from letitloop.errors import InvalidNameError, LetItLoopError, MisuseError


def fetch(user_id: int, calls: list[int] | None = None) -> dict[str, int]:
    if calls is not None:
        calls.append(user_id)
    return {"id": user_id}


class TestABareDurable:
    def test_it_fails_at_import_with_one_line_naming_the_right_form(self, tmp_path: Path) -> None:
        (tmp_path / "pipeline.py").write_text(
            textwrap.dedent(
                """
                from letitloop import durable

                @durable
                def sync_workflow(user_id):
                    return user_id
                """
            ),
            encoding="utf-8",
        )
        r = subprocess.run(
            [sys.executable, "-c", "import pipeline"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert r.returncode == 1
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("letitloop.errors.MisuseError: @durable needs a goal name"), last
        assert "@durable(goal_id='sync_workflow')" in last
        assert not (tmp_path / ".letitloop").exists()  # nothing was opened

    def test_bare_durable_async_fails_the_same_way(self) -> None:
        async def research() -> None: ...

        with pytest.raises(MisuseError, match=r"@durable_async\(goal_id='research'\)"):
            durable_async(research)  # type: ignore[arg-type]

    def test_empty_parentheses_say_a_goal_is_needed(self) -> None:
        with pytest.raises(MisuseError, match=r"@durable\(\) needs a goal name, found none"):
            durable()


class TestDurableWithGoal:
    def test_goal_is_accepted_as_journals_word_for_goal_id(self, tmp_path: Path) -> None:
        @durable(goal="sync", path=tmp_path / "j.db")
        def sync_workflow(user_id: int) -> dict[str, int]:
            return step("fetch", fetch, user_id)

        assert sync_workflow(1) == {"id": 1}
        with sqlite3.connect(tmp_path / "j.db") as db:
            rows = db.execute("SELECT goal, status, input FROM runs").fetchall()
        assert rows == [("sync", "completed", '{"user_id":1}')]

    def test_two_different_goal_names_are_refused(self) -> None:
        with pytest.raises(MisuseError, match="two goal names"):
            durable(goal_id="a", goal="b")

    def test_a_goal_that_is_not_text_is_refused(self) -> None:
        with pytest.raises(MisuseError, match="goal's name as text, found int 3"):
            durable(goal_id=3)  # type: ignore[arg-type]


class TestAStepGivenAValueInsteadOfAFunction:
    def test_it_says_the_call_already_ran_outside_the_journal(self, tmp_path: Path) -> None:
        with Journal("g", path=tmp_path / "j.db") as j:
            with pytest.raises(MisuseError) as caught:
                j.step("fetch", fetch(1))  # type: ignore[arg-type]
            assert j.step("fetch", fetch, 2) == {"id": 2}  # the key was not taken
        text = str(caught.value)
        assert text.startswith("step 'fetch': expected the function to call and its arguments")
        assert "got dict {'id': 1}" in text and "already ran, outside the journal" in text
        assert "j.step('fetch', fn, arg), not j.step('fetch', fn(arg))" in text
        assert isinstance(caught.value, TypeError) and isinstance(caught.value, LetItLoopError)

    def test_the_free_step_says_the_same(self, tmp_path: Path) -> None:
        @durable(goal_id="g", path=tmp_path / "j.db")
        def flow() -> None:
            step("fetch", fetch(1))  # type: ignore[arg-type]

        with pytest.raises(MisuseError, match="already ran, outside the journal"):
            flow()

    def test_an_async_step_given_a_coroutine_names_its_function(self, tmp_path: Path) -> None:
        async def fetch_async(user_id: int) -> int:
            return user_id

        async def main() -> str:
            async with Journal("g", path=tmp_path / "j.db") as j:
                with pytest.raises(MisuseError) as caught:
                    await j.async_step("fetch", fetch_async(1))  # type: ignore[call-overload]
                assert await async_step("fetch", fetch_async, 1) == 1
                return str(caught.value)

        text = asyncio.run(main())
        assert "got a coroutine that " in text
        assert "fetch_async(...) returned" in text
        assert "await j.async_step('fetch', " in text


class TestAStepWhoseNameWasForgotten:
    """``j.step(fetch, 1)``: the function where the name goes. The error says the name is
    missing and shows the right call, whatever the second argument is; nothing is called
    and nothing is recorded."""

    def test_it_says_the_name_is_missing_and_shows_the_call_with_its_name(
        self, tmp_path: Path
    ) -> None:
        calls: list[int] = []
        with Journal("g", path=tmp_path / "j.db") as j:
            with pytest.raises(InvalidNameError) as caught:
                j.step(fetch, 1, calls=calls)  # type: ignore[arg-type]
            assert j.step("fetch", fetch, 2) == {"id": 2}  # no key was taken
        text = str(caught.value)
        assert text == (
            "j.step(fetch, 1, calls=[]): the step's name is missing (the function fetch was "
            "passed where the name goes); name the step first: "
            'j.step("fetch", fetch, 1, calls=[])'
        )
        assert "outside the journal" not in text
        assert calls == []
        with sqlite3.connect(tmp_path / "j.db") as db:
            assert db.execute("SELECT key FROM journal_g").fetchall() == [("fetch",)]

    def test_a_function_as_the_second_argument_is_shown_by_its_name(self, tmp_path: Path) -> None:
        def transform(x: int) -> int:
            return x

        with Journal("g", path=tmp_path / "j.db") as j, pytest.raises(InvalidNameError) as caught:
            j.step(transform, fetch)  # type: ignore[arg-type]
        assert str(caught.value).endswith(
            'name the step first: j.step("transform", transform, fetch)'
        )

    def test_the_free_step_shows_the_free_call(self, tmp_path: Path) -> None:
        @durable(goal_id="g", path=tmp_path / "j.db")
        def flow() -> None:
            step(fetch, 1)  # type: ignore[arg-type]

        with pytest.raises(
            InvalidNameError, match=r'name the step first: step\("fetch", fetch, 1\)$'
        ):
            flow()

    def test_the_async_steps_show_their_own_calls(self, tmp_path: Path) -> None:
        async def fetch_async(user_id: int) -> int:
            return user_id

        async def main() -> list[str]:
            texts = []
            async with Journal("g", path=tmp_path / "j.db") as j:
                with pytest.raises(InvalidNameError) as caught:
                    await j.async_step(fetch_async, 1)  # type: ignore[call-overload]
                texts.append(str(caught.value))
                with pytest.raises(InvalidNameError) as caught:
                    await async_step(fetch_async, 1)  # type: ignore[call-overload]
                texts.append(str(caught.value))
            return texts

        on_journal, free = asyncio.run(main())
        assert on_journal.endswith('await j.async_step("fetch_async", fetch_async, 1)')
        assert free.endswith('await async_step("fetch_async", fetch_async, 1)')
        assert isinstance(InvalidNameError("x"), LetItLoopError)


class TestSetResultOnACompletedRun:
    def test_the_same_result_again_is_accepted(self, tmp_path: Path) -> None:
        for _ in range(2):
            with Journal("daily", run="2026-11-30", path=tmp_path / "j.db") as j:
                j.set_result({"b", "a", 1})
        assert j.was_completed and j.recorded_result() == {"a", "b", 1}

    def test_another_result_is_refused_and_the_recorded_one_kept(self, tmp_path: Path) -> None:
        with Journal("daily", run="2026-11-30", path=tmp_path / "j.db") as j:
            j.set_result("first")
        with (
            Journal("daily", run="2026-11-30", path=tmp_path / "j.db") as j,
            pytest.raises(MisuseError) as caught,
        ):
            j.set_result("second")
        assert f"run {j.run_id} of goal 'daily' (named '2026-11-30') completed before" in str(
            caught.value
        )
        assert 'with "first", which it keeps: set_result("second")' in str(caught.value)
        with Journal("daily", run="2026-11-30", path=tmp_path / "j.db") as j:
            assert j.recorded_result() == "first"


class TestAForgottenNameBesideAnArgumentWithNoFingerprint:
    def test_the_missing_name_is_said_first(self, tmp_path: Path) -> None:
        def transform(x: object) -> object:
            return x

        with Journal("g", path=tmp_path / "j.db") as j, pytest.raises(InvalidNameError) as caught:
            j.step(transform, fetch, object())  # type: ignore[arg-type]
        assert 'name the step first: j.step("transform", transform, fetch, <object' in str(
            caught.value
        )
