"""The restart policy on its own: a fake clock drives it, nothing sleeps."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import signal
from typing import Any

import pytest

from letitloop.errors import LetItLoopError, SupervisorError
from letitloop.supervision.policy import (
    DEFAULTS,
    ChildExit,
    Policy,
    RestartPolicy,
    parse_exit_status,
)
from letitloop.supervision.relaunch import program_argv
from letitloop.supervision.supervisor import supervise

KILLED = ChildExit(signal=signal.SIGKILL)
FAILED = ChildExit(code=1)
CLEAN = ChildExit(code=0)


class FakeClock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def crash_loop(policy: Policy, clock: FakeClock, deaths: int, uptime: float = 0.1) -> list[Any]:
    """Start and kill the child ``deaths`` times, sleeping each decided delay; the decisions."""
    pol = RestartPolicy(policy, clock=clock)
    decisions = []
    for _ in range(deaths):
        pol.started()
        clock.advance(uptime)
        d = pol.exited(KILLED)
        decisions.append(d)
        if d.action != "restart":
            break
        clock.advance(d.delay)
    return decisions


class TestTheBackoff:
    def test_it_grows_by_the_factor_from_the_first_delay_up_to_the_ceiling(self) -> None:
        policy = Policy(backoff=1.0, backoff_factor=2.0, backoff_max=20.0, max_restarts=None)
        decisions = crash_loop(policy, FakeClock(), 8)
        assert [d.delay for d in decisions] == [1.0, 2.0, 4.0, 8.0, 16.0, 20.0, 20.0, 20.0]
        assert [d.restart_number for d in decisions] == [1, 2, 3, 4, 5, 6, 7, 8]

    def test_a_factor_of_one_keeps_the_delay_constant(self) -> None:
        policy = Policy(backoff=0.5, backoff_factor=1.0, max_restarts=None, burst=100)
        assert {d.delay for d in crash_loop(policy, FakeClock(), 6)} == {0.5}

    def test_it_has_no_jitter_unless_asked(self) -> None:
        first = [d.delay for d in crash_loop(Policy(), FakeClock(), 4)]
        second = [d.delay for d in crash_loop(Policy(), FakeClock(), 4)]
        assert first == second == [1.0, 2.0, 4.0, 8.0]

    def test_jitter_spreads_each_delay_by_the_fraction_asked(self) -> None:
        clock = FakeClock()
        low = RestartPolicy(Policy(jitter=0.1), clock=clock, rng=lambda: 0.0)
        high = RestartPolicy(Policy(jitter=0.1), clock=clock, rng=lambda: 0.999999)
        for pol in (low, high):
            pol.started()
            clock.advance(0.1)
        assert low.exited(KILLED).delay == pytest.approx(0.9)
        assert high.exited(KILLED).delay == pytest.approx(1.1, rel=1e-5)

    def test_a_huge_restart_number_stays_at_the_ceiling(self) -> None:
        pol = RestartPolicy(Policy(backoff_max=7.0))
        assert pol.delay_for(100_000) == 7.0


class TestAChildThatStayedUpLongEnough:
    def test_it_resets_the_delay_and_the_restart_count(self) -> None:
        clock = FakeClock()
        policy = Policy(backoff=1.0, stable_after=30.0, max_restarts=3)
        pol = RestartPolicy(policy, clock=clock)
        for expected in (1.0, 2.0, 4.0):
            pol.started()
            clock.advance(0.5)
            d = pol.exited(KILLED)
            assert d.delay == expected
            clock.advance(d.delay)
        pol.started()
        clock.advance(30.0)
        d = pol.exited(KILLED)
        assert (d.action, d.delay, d.restart_number, d.reset) == ("restart", 1.0, 1, True)

    def test_an_uptime_just_short_of_stable_does_not_reset(self) -> None:
        clock = FakeClock()
        pol = RestartPolicy(Policy(stable_after=30.0, burst=100), clock=clock)
        for _ in range(2):
            pol.started()
            clock.advance(29.9)
            d = pol.exited(KILLED)
        assert (d.delay, d.restart_number, d.reset) == (2.0, 2, False)

    def test_the_budget_counts_again_from_zero_after_a_stable_run(self) -> None:
        clock = FakeClock()
        pol = RestartPolicy(Policy(max_restarts=1, stable_after=10.0), clock=clock)
        pol.started()
        clock.advance(1)
        assert pol.exited(FAILED).action == "restart"
        pol.started()
        clock.advance(11)  # stable: the one restart it had is forgiven
        assert pol.exited(FAILED).action == "restart"
        pol.started()
        clock.advance(1)
        assert pol.exited(FAILED).action == "give_up"


class TestTheRestartBudget:
    def test_it_gives_up_with_the_last_status_once_max_restarts_are_used(self) -> None:
        decisions = crash_loop(Policy(max_restarts=2, backoff=100), FakeClock(), 5)
        assert [d.action for d in decisions] == ["restart", "restart", "give_up"]
        assert decisions[-1].status == 137
        assert "budget" in decisions[-1].reason

    def test_zero_means_never_restart(self) -> None:
        decisions = crash_loop(Policy(max_restarts=0), FakeClock(), 3)
        assert [(d.action, d.status) for d in decisions] == [("give_up", 137)]

    def test_none_means_no_limit(self) -> None:
        # Deaths spaced past the breaker's window, and too short to count as stable.
        policy = Policy(max_restarts=None, backoff=11.0, backoff_factor=1.0, stable_after=1e9)
        decisions = crash_loop(policy, FakeClock(), 200)
        assert len(decisions) == 200
        assert {d.action for d in decisions} == {"restart"}


class TestTheBreaker:
    def test_more_than_burst_deaths_within_the_window_gives_up_at_once(self) -> None:
        policy = Policy(burst=3, window=10.0, backoff=0.1, backoff_factor=1.0, max_restarts=None)
        decisions = crash_loop(policy, FakeClock(), 10)
        assert [d.action for d in decisions] == ["restart"] * 3 + ["give_up"]
        assert "4 deaths within 10.0 s" in decisions[-1].reason
        assert "burst" in decisions[-1].reason

    def test_deaths_spread_wider_than_the_window_never_trip_it(self) -> None:
        policy = Policy(burst=3, window=10.0, backoff=4.0, backoff_factor=1.0, max_restarts=None)
        decisions = crash_loop(policy, FakeClock(), 30)
        assert {d.action for d in decisions} == {"restart"}

    def test_it_trips_before_the_budget_is_used(self) -> None:
        policy = Policy(burst=2, window=60.0, backoff=0.05, max_restarts=10)
        decisions = crash_loop(policy, FakeClock(), 10)
        assert [d.action for d in decisions] == ["restart", "restart", "give_up"]


class TestWhichExitsRestart:
    def test_exit_zero_ends_the_loop_with_zero(self) -> None:
        pol = RestartPolicy(Policy())
        pol.started()
        assert (pol.exited(CLEAN).action, pol.exited(CLEAN).status) == ("stop", 0)

    def test_on_failure_restarts_a_nonzero_exit_and_a_signal_death(self) -> None:
        for how in (FAILED, KILLED, ChildExit(signal=signal.SIGSEGV)):
            pol = RestartPolicy(Policy())
            pol.started()
            assert pol.exited(how).action == "restart"

    def test_on_crash_restarts_only_a_death_by_signal(self) -> None:
        pol = RestartPolicy(Policy(restart="on-crash"))
        pol.started()
        assert (pol.exited(FAILED).action, pol.exited(FAILED).status) == ("stop", 1)
        assert pol.exited(KILLED).action == "restart"

    def test_always_restarts_even_a_clean_exit(self) -> None:
        pol = RestartPolicy(Policy(restart="always"))
        pol.started()
        assert pol.exited(CLEAN).action == "restart"

    def test_a_listed_exit_code_is_not_restarted(self) -> None:
        pol = RestartPolicy(Policy(no_restart_on=frozenset({2})))
        pol.started()
        d = pol.exited(ChildExit(code=2))
        assert (d.action, d.status) == ("stop", 2)
        assert "no-restart-on" in d.reason
        assert pol.exited(ChildExit(code=3)).action == "restart"

    def test_a_listed_128_plus_n_matches_a_death_by_signal_n(self) -> None:
        pol = RestartPolicy(Policy(no_restart_on=frozenset({137})))
        pol.started()
        assert (pol.exited(KILLED).action, pol.exited(KILLED).status) == ("stop", 137)


class TestExitStatuses:
    def test_a_negative_returncode_is_a_death_by_that_signal(self) -> None:
        how = ChildExit.from_returncode(-9)
        assert (how.signal, how.status, how.signal_name) == (9, 137, "SIGKILL")
        assert how.describe() == "killed by SIGKILL"
        assert ChildExit.from_returncode(3).describe() == "exited with code 3"

    def test_signal_names_and_numbers_parse_as_exit_statuses(self) -> None:
        assert parse_exit_status("2") == 2
        assert parse_exit_status("SIGKILL") == 137
        assert parse_exit_status("term") == 143

    def test_a_bad_status_says_what_was_expected(self) -> None:
        with pytest.raises(SupervisorError, match="between 0 and 255"):
            parse_exit_status("300")
        with pytest.raises(SupervisorError, match="signal name"):
            parse_exit_status("SIGNOPE")


class TestBadSettings:
    @pytest.mark.parametrize(
        ("setting", "value"),
        [
            ("max_restarts", -1),
            ("backoff", -0.5),
            ("backoff_factor", 0.5),
            ("burst", 0),
            ("window", float("nan")),
            ("restart", "sometimes"),
            ("jitter", 2.0),
        ],
    )
    def test_they_are_refused_naming_the_setting(self, setting: str, value: object) -> None:
        with pytest.raises(SupervisorError, match=setting) as info:
            Policy(**{setting: value})  # type: ignore[arg-type]
        assert isinstance(info.value, LetItLoopError)
        assert str(pickle.loads(pickle.dumps(info.value))) == str(info.value)


class TestTheDefaults:
    """The settings' defaults are written once, in letitloop.supervision.policy."""

    def test_supervise_without_settings_takes_the_policy_defaults(self) -> None:
        params = inspect.signature(supervise).parameters
        for f in dataclasses.fields(Policy):
            assert params[f.name].default == getattr(DEFAULTS, f.name), f.name

    def test_lil_watch_without_options_takes_the_policy_defaults(self) -> None:
        from letitloop.cli import cli, watch

        # Under the lil group's context, as lil runs it (its help option names, its settings).
        with (
            cli.make_context("lil", ["watch"]) as parent,
            watch.make_context("watch", ["pipeline.py"], parent=parent) as ctx,
        ):
            given = {f.name: ctx.params[f.name] for f in dataclasses.fields(Policy)}
        assert Policy(**given) == DEFAULTS == Policy()


class TestRerunningTheProgram:
    def test_a_script_runs_again_by_its_absolute_path_with_its_arguments(self) -> None:
        tail, name = program_argv(["python3", "job.py", "--date", "x"], "/srv/app/job.py")
        assert (tail, name) == (["/srv/app/job.py", "--date", "x"], "job.py")

    def test_a_module_runs_again_with_dash_m_and_the_interpreter_flags(self) -> None:
        tail, name = program_argv(["python3", "-u", "-X", "dev", "-m", "pkg.mod", "a"], None)
        assert (tail, name) == (["-u", "-X", "dev", "-m", "pkg.mod", "a"], "pkg.mod")

    def test_combined_short_flags_before_m_are_kept(self) -> None:
        tail, _ = program_argv(["python3", "-um", "pkg.mod", "-m", "x"], None)
        assert tail == ["-u", "-m", "pkg.mod", "-m", "x"]

    def test_the_interactive_flag_is_dropped(self) -> None:
        tail, _ = program_argv(["python3", "-i", "-Wignore", "job.py"], "/a/job.py")
        assert tail == ["-Wignore", "/a/job.py"]

    @pytest.mark.parametrize(
        "argv",
        [["python3", "-c", "pass"], ["python3"], ["python3", "-"], ["python3", "-u"]],
    )
    def test_a_program_that_cannot_run_again_is_refused(self, argv: list[str]) -> None:
        with pytest.raises(SupervisorError, match="@supervise cannot"):
            program_argv(argv, None)
