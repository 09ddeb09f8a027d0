"""The restart policy of ``lil watch`` and ``@supervise``: its settings and what follows a death.

Pure: :class:`RestartPolicy` reads time only from the clock it is given and
random numbers only from the source it is given, so tests drive it with a
fake clock and never sleep. Its settings' defaults live here, once
(:data:`DEFAULTS`): ``supervise()`` and the options of ``lil watch`` read them.
The process loop that asks it is ``supervisor.py``.
"""

from __future__ import annotations

import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NoReturn

from ..errors import SupervisorError

RestartMode = Literal["on-failure", "on-crash", "always"]
RESTART_MODES: tuple[RestartMode, ...] = ("on-failure", "on-crash", "always")


@dataclass(frozen=True)
class Policy:
    """The restart settings; the defaults are those of ``lil watch``.

    Raises SupervisorError at construction when a setting is out of range.
    """

    #: Restarts allowed since the last stable run; None for no limit.
    max_restarts: int | None = 10
    #: Seconds before the first restart.
    backoff: float = 1.0
    #: Each further restart waits this many times longer than the previous one.
    backoff_factor: float = 2.0
    #: The longest wait between two starts.
    backoff_max: float = 60.0
    #: A child that stayed up this long resets the delay and the restart count.
    stable_after: float = 30.0
    #: More than ``burst`` deaths within ``window`` seconds trips the breaker.
    burst: int = 5
    window: float = 10.0
    #: Which deaths restart: any failure, only signal deaths, or every exit.
    restart: RestartMode = "on-failure"
    #: Exit statuses that never restart (128+N matches a death by signal N).
    no_restart_on: frozenset[int] = field(default_factory=frozenset)
    #: Seconds the child gets to exit after a forwarded signal, before SIGKILL.
    grace: float = 10.0
    #: Random spread of each delay, as a fraction (0.1 = ±10 %); off by default.
    jitter: float = 0.0

    def __post_init__(self) -> None:
        def bad(name: str, expected: str, value: object) -> NoReturn:
            raise SupervisorError(
                f"supervision setting {name} must be {expected}, got {value!r}; "
                f"fix the value passed to lil watch or @supervise"
            )

        if self.max_restarts is not None and (
            not isinstance(self.max_restarts, int) or self.max_restarts < 0
        ):
            bad("max_restarts", "a whole number >= 0 or None (no limit)", self.max_restarts)
        for name in ("backoff", "backoff_max", "stable_after", "window", "grace"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0 or value != value:
                bad(name, "a number of seconds >= 0", value)
        if not isinstance(self.backoff_factor, (int, float)) or not self.backoff_factor >= 1:
            bad("backoff_factor", "a number >= 1", self.backoff_factor)
        if not isinstance(self.burst, int) or self.burst < 1:
            bad("burst", "a whole number >= 1", self.burst)
        if self.restart not in RESTART_MODES:
            bad("restart", "one of " + ", ".join(RESTART_MODES), self.restart)
        if not isinstance(self.jitter, (int, float)) or not 0 <= self.jitter <= 1:
            bad("jitter", "a fraction between 0 and 1", self.jitter)
        codes = frozenset(self.no_restart_on)
        for code in codes:
            if not isinstance(code, int) or not 0 <= code <= 255:
                bad("no_restart_on", "exit statuses between 0 and 255", code)
        object.__setattr__(self, "no_restart_on", codes)


#: The settings of ``lil watch`` and ``@supervise`` when none is given.
DEFAULTS = Policy()


@dataclass(frozen=True)
class ChildExit:
    """How a child ended: an exit code, or the signal that killed it."""

    code: int | None = None
    signal: int | None = None

    @classmethod
    def from_returncode(cls, returncode: int) -> ChildExit:
        """From ``Popen.returncode``: negative means killed by that signal."""
        if returncode < 0:
            return cls(signal=-returncode)
        return cls(code=returncode)

    @property
    def status(self) -> int:
        """The shell's view: the exit code, or 128+N for a death by signal N."""
        if self.signal is not None:
            return 128 + self.signal
        return self.code or 0

    @property
    def signal_name(self) -> str | None:
        return None if self.signal is None else signal_name(self.signal)

    def describe(self) -> str:
        if self.signal is not None:
            return f"killed by {signal_name(self.signal)}"
        return f"exited with code {self.code}"


Action = Literal["restart", "stop", "give_up"]


@dataclass(frozen=True)
class Decision:
    """What the policy decided after a death.

    ``action`` is ``restart`` (after ``delay`` seconds), ``stop`` (the child
    finished, or its exit is one that must not restart) or ``give_up`` (the
    restart budget or the breaker ended the loop). ``status`` is the exit
    status the watcher ends with when it does not restart.
    """

    action: Action
    status: int
    delay: float = 0.0
    #: The restart about to happen, counted since the last stable run (1, 2, …).
    restart_number: int = 0
    #: Why the loop ends (empty for a restart).
    reason: str = ""
    #: True when the child's uptime reset the delay and the restart count.
    reset: bool = False


class RestartPolicy:
    """The state machine of restarts: backoff, stable reset, budget and breaker.

    Call :meth:`started` when a child starts and :meth:`exited` when it ends;
    the policy reads time only from ``clock`` (monotonic seconds) and random
    numbers only from ``rng`` (floats in [0, 1), used for jitter).
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self.policy = policy or Policy()
        self.clock = clock
        if rng is None:
            import random

            rng = random.random
        self.rng = rng
        #: Starts so far (the attempt number of the running or last child).
        self.attempt = 0
        #: Restarts since the last stable run (what max_restarts limits).
        self.restarts = 0
        self._started_at: float | None = None
        self._deaths: deque[float] = deque()

    def started(self) -> int:
        """Note that a child started now; return its attempt number (1, 2, …)."""
        self.attempt += 1
        self._started_at = self.clock()
        return self.attempt

    def uptime(self) -> float:
        """Seconds since the last :meth:`started` (0 before any start)."""
        return 0.0 if self._started_at is None else max(0.0, self.clock() - self._started_at)

    def delay_for(self, restart_number: int) -> float:
        """The backoff before restart ``restart_number`` (1-based), without jitter."""
        p = self.policy
        try:
            delay = p.backoff * p.backoff_factor ** (restart_number - 1)
        except OverflowError:
            delay = p.backoff_max
        return min(delay, p.backoff_max)

    def exited(self, how: ChildExit) -> Decision:
        """Decide what follows the death of the running child (call once per start)."""
        p = self.policy
        now = self.clock()
        uptime = self.uptime()
        status = how.status
        if how.signal is None and how.code == 0 and p.restart != "always":
            return Decision("stop", 0, reason="finished")
        if p.restart == "on-crash" and how.signal is None:
            return Decision("stop", status, reason="not a crash (restart on-crash)")
        if status in p.no_restart_on:
            return Decision("stop", status, reason=f"exit status {status} is in no-restart-on")

        reset = uptime >= p.stable_after and self.restarts > 0
        if uptime >= p.stable_after:
            # It ran long enough to count as healthy: start the backoff and the
            # budget afresh (pm2's min_uptime, supervisord's startsecs).
            self.restarts = 0

        # The breaker: a crash loop ends now, whatever the budget says
        # (systemd's StartLimitBurst within StartLimitIntervalSec).
        self._deaths.append(now)
        while self._deaths and self._deaths[0] < now - p.window:
            self._deaths.popleft()
        if len(self._deaths) > p.burst:
            return Decision(
                "give_up",
                status,
                reason=(
                    f"{len(self._deaths)} deaths within {seconds_text(p.window)} "
                    f"(more than the burst limit of {p.burst})"
                ),
                reset=reset,
            )
        if p.max_restarts is not None and self.restarts >= p.max_restarts:
            return Decision(
                "give_up",
                status,
                reason=f"restart budget used up ({p.max_restarts} restarts)",
                reset=reset,
            )
        self.restarts += 1
        delay = self.delay_for(self.restarts)
        if p.jitter:
            delay = max(0.0, delay * (1 + p.jitter * (2 * self.rng() - 1)))
        return Decision("restart", status, delay=delay, restart_number=self.restarts, reset=reset)

    def restart_label(self, decision: Decision) -> str:
        """``2/10`` (or ``2`` with no limit) for the message of a restart."""
        limit = self.policy.max_restarts
        n = decision.restart_number
        return f"{n}" if limit is None else f"{n}/{limit}"


def signal_name(signum: int) -> str:
    """``SIGKILL`` for 9; ``signal 64`` for a number with no name here."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def parse_exit_status(text: str) -> int:
    """An exit status from ``3``, ``137`` or a signal name (``SIGKILL``, ``KILL`` -> 137)."""
    value = text.strip()
    if value.lstrip("-").isdigit():
        code = int(value)
        if not 0 <= code <= 255:
            raise SupervisorError(
                f"an exit status must be between 0 and 255, got {code}; "
                f"use 128+N (or the signal's name) for a death by signal N"
            )
        return code
    name = value.upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    try:
        return 128 + int(signal.Signals[name])
    except KeyError:
        raise SupervisorError(
            f"expected an exit status (0-255) or a signal name such as SIGKILL, got {text!r}"
        ) from None


def seconds_text(s: float) -> str:
    if s < 1:
        return f"{s:.2f} s"
    return f"{s:.1f} s" if s < 100 else f"{s:.0f} s"
