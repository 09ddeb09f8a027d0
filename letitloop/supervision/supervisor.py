"""The child-process loop behind ``lil watch`` and ``@supervise``.

:class:`Supervisor` runs the child interpreter in its own process group,
waits for it, forwards SIGINT/SIGTERM/SIGHUP to the group, asks the restart
policy (``policy.py``, pure and tested on its own) what follows each death,
sleeps the backoff and starts it again; every event is one line on stderr
and one row of ``supervisor_events`` in the journal file (``recorder.py``).
``watch()`` and ``@supervise`` start it; the child's command line comes from
``relaunch.py``.

Starting the child, forwarding the signals and stopping what it leaves
running is ``childproc.py``'s: on Linux the child dies with its watcher (a
parent-death signal armed by the exec shim, ``_exec_shim.py``), and ``lil
watch`` adopts, stops and reaps the descendants that leave the child's
process group (``_proctree.py``).

This module never imports click: ``import letitloop`` stays light.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import IO, ParamSpec, TypeVar, overload

from ..errors import SupervisorError
from ..identity.ids import new_run_id
from .childproc import POLL_S, ChildProcesses
from .policy import (
    DEFAULTS,
    ChildExit,
    Decision,
    Policy,
    RestartMode,
    RestartPolicy,
    parse_exit_status,
    seconds_text,
    signal_name,
)
from .recorder import Recorder
from .relaunch import program_argv, refuse_interactive, supervised_child

P = ParamSpec("P")
R = TypeVar("R")


# -- the loop -----------------------------------------------------------------


class _Stop(Exception):
    """Internal: the watcher was asked to stop by this signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Supervisor:
    """Runs ``argv`` as a child interpreter and restarts it per the policy.

    :meth:`run` returns the exit status the watcher should end with: 0 when
    the child finished, the child's last status (128+N for a signal) when the
    loop stopped or gave up, 128+N when the watcher got signal N.

    On Linux each child dies with this process (see ``_exec_shim.py``). With
    ``subreaper=True`` (``lil watch``; Linux only) this process also adopts
    every descendant of the child whose parent dies, reaps it, and stops it
    with the child: what left the child's process group gets SIGTERM when the
    group gets the stop signal, and SIGKILL with it after the grace.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        target: str,
        policy: Policy | None = None,
        db: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        err: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] | None = None,
        subreaper: bool = False,
    ) -> None:
        if os.name != "posix":
            raise SupervisorError(
                "supervision needs POSIX process groups and signals (Linux, macOS), found "
                f"{sys.platform}; on Windows run it under WSL"
            )
        self.argv = list(argv)
        self.target = target
        self.policy = RestartPolicy(policy, clock=clock, rng=rng)
        self.clock = clock
        self.err = err if err is not None else sys.stderr
        self.watch_id = new_run_id(time.time())
        self.recorder = Recorder(db, watch_id=self.watch_id, target=target, err=self.err)
        self.env = dict(os.environ if env is None else env)
        #: Starts each child, forwards the stop signals, reaps and stops its family.
        self.children = ChildProcesses(clock=clock, subreaper=subreaper)
        #: The stop signals this watcher got, in order (shared with ``children``).
        self._stop = self.children.stop

    # -- messages --

    def say(self, line: str) -> str:
        text = f"lil: {line}"
        # A closed stderr must not stop the supervision.
        with contextlib.suppress(OSError, ValueError):
            print(text, file=self.err, flush=True)
        return text

    def _check_stop(self) -> None:
        if self._stop:
            raise _Stop(self._stop[0])

    # -- the loop --

    def run(self) -> int:
        """Start, watch and restart the child until the policy or a signal ends it."""
        try:
            with self.children.watching():
                return self._loop()
        finally:
            self.recorder.close()

    def _loop(self) -> int:
        pol = self.policy
        while True:
            try:
                self._check_stop()
            except _Stop as stop:
                return self._stopped_between(stop.signum)
            attempt = pol.started()
            env = {
                **self.env,
                "LETITLOOP_ATTEMPT": str(attempt),
                "LETITLOOP_SUPERVISED": "1",
                "LETITLOOP_WATCH_ID": self.watch_id,
                # The child's journals go to the journal these records go to.
                "LETITLOOP_DB": self.recorder.location,
            }
            proc = self.children.start(self.argv, env)
            line = self.say(f"{self.target} started (attempt {attempt}, pid {proc.pid})")
            self.recorder.record("start", attempt, child_pid=proc.pid, message=line)
            returncode = self.children.wait(proc)
            if returncode is None:
                return self._stop_child(proc, attempt)
            self.children.proc = None
            how = ChildExit.from_returncode(returncode)
            uptime = pol.uptime()
            decision = pol.exited(how)
            if decision.action == "restart":
                chosen = self.recorder.stopped_by_choice(attempt)
                if chosen is not None:
                    decision = Decision("stop", how.status, reason=chosen)
            what = f"{self.target} {how.describe()} after {seconds_text(uptime)}"
            if decision.action == "restart":
                note = "; stayed up long enough, backoff reset" if decision.reset else ""
                why = (
                    f"restart {pol.restart_label(decision)} in {seconds_text(decision.delay)}{note}"
                )
                event = "restart"
            elif decision.action == "stop" and decision.reason == "finished":
                why, event = "done", "stop"
            elif decision.action == "stop":
                why, event = f"not restarting: {decision.reason}; exit {decision.status}", "stop"
            else:
                why, event = f"giving up: {decision.reason}; exit {decision.status}", "give_up"
            line = self.say(f"{what}; {why}")
            self.recorder.exited(attempt, proc.pid, how, uptime, line)
            delay = decision.delay if event == "restart" else None
            self.recorder.record(event, attempt, child_pid=proc.pid, delay_s=delay, message=line)
            # Stragglers of the dead child (workers it forked) must not outlive
            # it: the next attempt would run beside them.
            self._clear_group(proc.pid)
            if event != "restart":
                return decision.status
            try:
                self._sleep(decision.delay)
            except _Stop as stop:
                return self._stopped_between(stop.signum)

    def _sleep(self, seconds: float) -> None:
        deadline = self.clock() + seconds
        while True:
            self._check_stop()
            left = deadline - self.clock()
            if left <= 0:
                return
            time.sleep(min(POLL_S, left))

    def _stop_child(self, proc: subprocess.Popen[bytes], attempt: int) -> int:
        """The watcher got a stop signal while the child ran: stop the group, then exit."""
        signum = self._stop[0]
        status = 128 + signum
        grace = self.policy.policy.grace
        self.say(
            f"got {signal_name(signum)}; stopping {self.target} "
            f"(pid {proc.pid}, grace {seconds_text(grace)})"
        )
        killed = self.children.stop_running(proc, signum, grace)
        how = ChildExit.from_returncode(proc.returncode)
        uptime = self.policy.uptime()
        after = f"; sent SIGKILL after the {seconds_text(grace)} grace" if killed else ""
        line = self.say(
            f"{self.target} {how.describe()} after {seconds_text(uptime)}{after}; "
            f"stopped by {signal_name(signum)}, not restarting; exit {status}"
        )
        self.recorder.exited(attempt, proc.pid, how, uptime, line)
        self.recorder.record(
            "stop", attempt, child_pid=proc.pid, signal=signal_name(signum), message=line
        )
        return status

    def _stopped_between(self, signum: int) -> int:
        """A stop signal during a backoff: no child runs, so just end."""
        status = 128 + signum
        line = self.say(
            f"got {signal_name(signum)} while waiting to restart; stopping; exit {status}"
        )
        self.recorder.record("stop", self.policy.attempt, signal=signal_name(signum), message=line)
        return status

    def _clear_group(self, pgid: int) -> None:
        """SIGTERM what a dead child left running, SIGKILL it after the grace.

        That is its process group and, under ``lil watch`` on Linux, every
        descendant that left the group (adopted by this watcher when its
        parent died).
        """
        where = self.children.leftovers(pgid)
        if where is None:
            return
        self.say(f"stopping what {self.target} left running {where}")
        self.children.clear(pgid, self.policy.policy.grace)


def watch(
    argv: Sequence[str],
    *,
    target: str,
    policy: Policy | None = None,
    db: str | os.PathLike[str] | None = None,
) -> int:
    """Run ``argv`` under supervision; return the exit status the watcher should end with."""
    # The watcher of `lil watch` does nothing but watch, so it can adopt the
    # child's orphans; @supervise runs in the user's program and does not.
    return Supervisor(argv, target=target, policy=policy, db=db, subreaper=True).run()


# -- @supervise ---------------------------------------------------------------


@overload
def supervise(fn: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def supervise(
    fn: None = None,
    /,
    *,
    max_restarts: int | None = ...,
    backoff: float = ...,
    backoff_factor: float = ...,
    backoff_max: float = ...,
    stable_after: float = ...,
    burst: int = ...,
    window: float = ...,
    restart: RestartMode = ...,
    no_restart_on: Iterable[int | str] = ...,
    grace: float = ...,
    jitter: float = ...,
    db: str | os.PathLike[str] | None = ...,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def supervise(
    fn: Callable[P, R] | None = None,
    /,
    *,
    max_restarts: int | None = DEFAULTS.max_restarts,
    backoff: float = DEFAULTS.backoff,
    backoff_factor: float = DEFAULTS.backoff_factor,
    backoff_max: float = DEFAULTS.backoff_max,
    stable_after: float = DEFAULTS.stable_after,
    burst: int = DEFAULTS.burst,
    window: float = DEFAULTS.window,
    restart: RestartMode = DEFAULTS.restart,
    no_restart_on: Iterable[int | str] = DEFAULTS.no_restart_on,
    grace: float = DEFAULTS.grace,
    jitter: float = DEFAULTS.jitter,
    db: str | os.PathLike[str] | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Restart the program when it dies, from inside the script: ``lil watch`` as a decorator.

    Called in an unsupervised process, the decorated function does not run
    there: the program is started again (same interpreter, same script or
    ``-m`` module, same arguments) as a supervised child, restarted by the
    policy like ``lil watch``, and this process exits with the final status
    (``SystemExit``). Inside that child (``LETITLOOP_SUPERVISED=1``) the
    function is simply called. Code that runs before the call runs in the
    watcher too: call the function from ``if __name__ == "__main__":``.

    Raises SupervisorError, when called, in an interactive session, a notebook
    or a ``python -c`` command (nothing to re-run), and at decoration time for
    settings out of range.
    """
    policy = Policy(
        max_restarts=max_restarts,
        backoff=backoff,
        backoff_factor=backoff_factor,
        backoff_max=backoff_max,
        stable_after=stable_after,
        burst=burst,
        window=window,
        restart=restart,
        no_restart_on=frozenset(
            code if isinstance(code, int) else parse_exit_status(code) for code in no_restart_on
        ),
        grace=grace,
        jitter=jitter,
    )

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if supervised_child():
                return func(*args, **kwargs)
            refuse_interactive()
            main = sys.modules.get("__main__")
            tail, target = program_argv(sys.orig_argv, getattr(main, "__file__", None))
            status = Supervisor([sys.executable, *tail], target=target, policy=policy, db=db).run()
            raise SystemExit(status)

        return wrapper

    if fn is not None:
        return decorate(fn)
    return decorate


__all__ = ["Supervisor", "supervise", "watch"]
