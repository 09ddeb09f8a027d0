"""The supervised child as processes: :class:`ChildProcesses` starts each one and stops its family.

It starts the child through the exec shim in its own session, forwards the
watcher's stop signals to the child's process group, reaps the orphans it
adopted as subreaper (``_proctree.py``), and stops the group and what left it.
The restart loop that uses it, and its decisions, are ``supervisor.py``'s.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

from ..errors import SupervisorError
from . import _proctree
from ._exec_shim import shim_argv
from ._proctree import group_alive as _group_alive
from ._proctree import killpg as _killpg

#: Signals that stop the watcher. Each is forwarded to the child's process
#: group and ends the loop without a restart; the watcher then exits 128+N
#: (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP). SIGHUP is included
#: because the child runs in its own session: a closed terminal would
#: otherwise kill the watcher and leave the child running, unwatched.
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)

#: How often the watcher wakes to check for a stop request while the child
#: runs or a backoff elapses. Short enough that Ctrl+C feels instant, long
#: enough to cost nothing.
POLL_S = 0.05

#: Start each child through the exec shim, which arms its parent-death signal
#: (a Linux prctl; elsewhere the child is started directly).
_SHIM = sys.platform.startswith("linux")

#: After SIGKILL, how long the watcher waits for the group to disappear
#: before moving on (a process stuck in uninterruptible I/O cannot be hurried).
KILL_WAIT_S = 2.0


class ChildProcesses:
    """The watcher's side of its children: start, signals, reaping, stopping.

    ``stop`` lists the stop signals the watcher got, in order (the restart
    loop reads it); ``proc`` is the running child, if any. With ``subreaper``
    (Linux only) this process adopts every descendant of the child whose
    parent dies, reaps it, and stops it with the child.
    """

    def __init__(self, *, clock: Callable[[], float], subreaper: bool) -> None:
        self.clock = clock
        self.stop: list[int] = []
        self.proc: subprocess.Popen[bytes] | None = None
        #: True once the stop signal reached the running child's group.
        self.forwarded = False
        #: Adopt the child's orphans and stop them with it (Linux): ``lil watch``
        #: only, since the flag makes this process inherit every orphan below it.
        self.subreaper = subreaper and _proctree.LINUX

    # -- signals and adoption --

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop.append(signum)
        proc = self.proc
        if proc is not None and proc.returncode is None:
            # A second signal while the child is already being stopped: no more grace.
            _killpg(proc.pid, signal.SIGKILL if self.forwarded else signum)
            self.forwarded = True

    @contextlib.contextmanager
    def _signals(self) -> Any:
        previous: dict[signal.Signals, Any] = {}
        try:
            for s in STOP_SIGNALS:
                previous[s] = signal.signal(s, self._on_signal)
        except ValueError:
            # Not the main thread: signal handlers cannot be installed here.
            for s, h in previous.items():
                signal.signal(s, h)
            raise SupervisorError(
                "supervision must run in the main thread (it handles SIGINT and SIGTERM); "
                "call the @supervise function or lil watch from the main thread"
            ) from None
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Become subreaper (if asked), catch the stop signals; undo both, reaping, after."""
        was_subreaper = None
        if self.subreaper:
            was_subreaper = _proctree.set_child_subreaper(True)
            self.subreaper = was_subreaper is not None
        try:
            with self._signals():
                yield
        finally:
            if self.subreaper:
                _proctree.reap()
                if not was_subreaper:
                    _proctree.set_child_subreaper(False)

    # -- one child --

    def start(self, argv: Sequence[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        """Start ``argv`` in its own session (through the shim on Linux); it becomes ``proc``.

        Raises SupervisorError when it cannot be started. A stop signal that
        came while it was starting is forwarded to it at once.
        """
        # On Linux the shim arms the child's parent-death signal, then
        # execs the command in the same process (see _exec_shim.py).
        command = list(argv)
        if _SHIM:
            # Refused here as Popen would refuse it, not as a failing child.
            if shutil.which(command[0], path=env.get("PATH", os.defpath)) is None:
                raise SupervisorError(
                    f"cannot start {argv[0]!r} (not an executable file); check the interpreter path"
                )
            command = shim_argv(os.getpid(), command)
        try:
            # start_new_session: the child leads its own session and process
            # group, so the watcher can signal it and every grandchild at once,
            # and Ctrl+C in the terminal reaches only the watcher, which forwards it.
            proc = subprocess.Popen(command, env=env, start_new_session=True)
        except OSError as exc:
            raise SupervisorError(
                f"cannot start {argv[0]!r} ({exc}); check the interpreter path"
            ) from None
        self.forwarded = False
        self.proc = proc
        if self.stop and not self.forwarded:  # it came while Popen was starting
            self.forwarded = True
            _killpg(proc.pid, self.stop[0])
        return proc

    def wait(self, proc: subprocess.Popen[bytes]) -> int | None:
        """The child's returncode, or None when a stop signal arrived first."""
        # A thread blocks in wait() so that the death is seen at once; the main
        # thread wakes every POLL_S to see whether a stop signal arrived.
        waiter = threading.Thread(target=proc.wait, name="letitloop-wait", daemon=True)
        waiter.start()
        while waiter.is_alive():
            if self.stop:
                return None
            waiter.join(POLL_S)
            if self.subreaper:
                _proctree.reap(keep=proc.pid)  # adopted orphans that exited
        # A child that died of the signal just forwarded to it was stopped, not crashed.
        return None if self.stop else proc.returncode

    def stop_running(self, proc: subprocess.Popen[bytes], signum: int, grace: float) -> bool:
        """Stop the running child's family with ``signum``, SIGKILL after ``grace``.

        Returns once the child is reaped; true if SIGKILL was needed (the
        grace ran out, or a second stop signal came).
        """
        if not self.forwarded:
            self.forwarded = True
            _killpg(proc.pid, signum)
        # What left the group is no terminal's job: it gets a daemon's stop request.
        for pid in self._others(proc.pid):
            _proctree.kill(pid, signal.SIGTERM)
        deadline = self.clock() + grace
        killed = False
        while proc.poll() is None or self._family_alive(proc.pid):
            if self.clock() >= deadline or len(self.stop) > 1:
                if not killed:
                    killed = True
                    deadline = self.clock() + KILL_WAIT_S
                else:
                    break
            if killed:  # again each round: a process may fork or be adopted meanwhile
                self._signal_family(proc.pid, signal.SIGKILL)
            time.sleep(POLL_S / 2)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        self.proc = None
        return killed

    # -- what a dead child left running --

    def leftovers(self, pgid: int) -> str | None:
        """Where a dead child left processes running (for a message); None if nowhere.

        That is its process group and, under ``lil watch`` on Linux, every
        descendant that left the group (adopted by this watcher when its
        parent died).
        """
        in_group, others = _group_alive(pgid), self._others(pgid)
        if not in_group and not others:
            return None
        outside = f"(pid {', '.join(map(str, others))})"
        return (
            f"in its process group and outside it {outside}"
            if in_group and others
            else f"outside its process group {outside}"
            if others
            else "in its process group"
        )

    def clear(self, pgid: int, grace: float) -> None:
        """SIGTERM what a dead child left running, SIGKILL it after the grace."""
        self._signal_family(pgid, signal.SIGTERM)
        deadline = self.clock() + grace
        while self._family_alive(pgid) and self.clock() < deadline and not self.stop:
            time.sleep(POLL_S / 2)
        deadline = self.clock() + KILL_WAIT_S
        while self._family_alive(pgid) and self.clock() < deadline:
            self._signal_family(pgid, signal.SIGKILL)
            time.sleep(POLL_S / 2)

    # -- the child's family: its process group and, as subreaper, what left it --

    def _others(self, pgid: int) -> list[int]:
        """Live descendants of this watcher outside group ``pgid`` (only as subreaper).

        As subreaper, every process the child started stays a descendant of
        this watcher, even after its own parent died.
        """
        if not self.subreaper or not _proctree.has_children():
            return []
        return [p.pid for p in _proctree.descendants(os.getpid()) if p.pgid != pgid]

    def _family_alive(self, pgid: int) -> bool:
        """True while group ``pgid`` or a descendant outside it lives; reaps the ones that died."""
        if self.subreaper:
            proc = self.proc
            _proctree.reap(keep=None if proc is None else proc.pid)
        return _group_alive(pgid) or bool(self._others(pgid))

    def _signal_family(self, pgid: int, signum: int) -> None:
        _killpg(pgid, signum)
        for pid in self._others(pgid):
            _proctree.kill(pid, signum)
