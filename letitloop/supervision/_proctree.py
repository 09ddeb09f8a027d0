"""The processes under a watcher: its child's process group, every descendant, reaping.

The process-group calls work on any POSIX system. Finding descendants that
left the group (``setsid``, a double fork) reads ``/proc`` and needs the
watcher to be their subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): both are
Linux only, and elsewhere these functions find nothing (see ``LINUX``).
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ._exec_shim import PR_GET_CHILD_SUBREAPER, PR_SET_CHILD_SUBREAPER, prctl

_PROC = Path("/proc")


def _proc_is_ours() -> bool:
    """True when /proc shows this process's own pid namespace (a container may mount another)."""
    try:
        return os.readlink(_PROC / "self") == str(os.getpid())
    except OSError:
        return False


#: True where descendants can be found (/proc) and adopted (the subreaper flag).
LINUX: bool = sys.platform.startswith("linux") and _proc_is_ours()


@dataclass(frozen=True)
class Proc:
    """One line of ``/proc/PID/stat``: the fields the watcher needs."""

    pid: int
    ppid: int
    pgid: int
    #: R, S, D, Z (zombie: dead, waiting to be reaped), X (dead), …
    state: str

    @property
    def live(self) -> bool:
        return self.state not in ("Z", "X")


def processes() -> list[Proc]:
    """Every process in /proc (empty where there is none)."""
    found = []
    try:
        entries = os.listdir(_PROC)
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = (_PROC / entry / "stat").read_text()
        except OSError:
            continue  # it exited while we looked
        # The command name is in parentheses and may itself hold ") ".
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2:
            found.append(Proc(int(entry), int(fields[1]), int(fields[2]), fields[0]))
    return found


def descendants(root: int) -> list[Proc]:
    """The live descendants of ``root`` at any depth, in any group or session (not ``root``).

    A process whose parent died is found only if it was adopted by ``root``
    or by one of its descendants: make ``root`` a subreaper for that.
    """
    children: dict[int, list[Proc]] = {}
    for p in processes():
        children.setdefault(p.ppid, []).append(p)
    found, todo = [], [root]
    while todo:
        for p in children.get(todo.pop(), ()):
            todo.append(p.pid)
            if p.live:
                found.append(p)
    return found


def group_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process is in group ``pgid``.

    On Linux it reads /proc, because a zombie still counts as a member of its
    group for ``killpg(pgid, 0)`` and a container's init may never reap it.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False  # the common case, answered without reading /proc
    except PermissionError:
        return True
    if LINUX:
        return any(p.pgid == pgid and p.live for p in processes())
    return True


def killpg(pgid: int, signum: int) -> None:
    """Signal a process group; one that is gone (or not ours) is ignored."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def kill(pid: int, signum: int) -> None:
    """Signal a process; one that is gone (or not ours) is ignored."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def has_children() -> bool:
    """True while this process has a child, live or not yet reaped (one system call)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def set_child_subreaper(on: bool) -> bool | None:
    """Make this process the subreaper of its descendants (or stop); return the previous setting.

    A subreaper adopts every orphan among its descendants (a process whose
    parent died, such as the daemon left by a double fork) instead of init,
    and must reap them. Returns None where that is not possible (not Linux,
    or prctl refused); nothing changes then.
    """
    if not LINUX:
        return None
    import ctypes

    before = ctypes.c_int()
    got, _ = prctl(PR_GET_CHILD_SUBREAPER, ctypes.addressof(before))
    result, _ = prctl(PR_SET_CHILD_SUBREAPER, int(on))
    if got != 0 or result != 0:
        return None
    return bool(before.value)


def reap(keep: int | None = None) -> int:
    """Collect every exited child of this process but ``keep``; return how many.

    ``keep`` is the child a ``subprocess.Popen`` waits for: reaping it here
    would steal its exit status. Never blocks.
    """
    reaped = 0
    while True:
        try:
            # WNOWAIT: look at who exited without collecting it yet.
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return reaped
        if info is None or info.si_pid == keep:
            # Nothing exited, or the one in front is Popen's: it collects that
            # one itself, and the others behind it wait for the next call.
            return reaped
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, os.WNOHANG)
        reaped += 1
