"""Start a command that dies with its watcher: the exec shim of ``lil watch`` (Linux).

The watcher starts each child as ``python -I -S _exec_shim.py WATCHER_PID --
COMMAND...``. This file, run as a script in the freshly forked child, arms
the parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), checks that
its parent is still the watcher, and replaces itself with COMMAND (``execvp``:
same pid, same process group, same open files, same environment). From then
on the kernel SIGKILLs the child the moment its watcher dies, however it dies
(SIGKILL, the OOM killer, a crash).

Why a shim and not ``subprocess``'s ``preexec_fn``: running Python code
between fork and exec in a process that has threads can deadlock (a lock held
by another thread at the fork is never released in the child). Here the
prctl runs in a new single-threaded interpreter instead. The parent-death
signal survives ``execve`` (the kernel clears it only for a set-user-ID or
set-group-ID program, a program with file capabilities, or a change of
credentials), so the command inherits it.

The cost is one bare interpreter start per child (``-I -S``: no site
packages, no user paths, no environment variables read; about 8 ms) plus the
prctl call. It imports nothing outside the standard library's built-ins, so
that it also runs when the package itself is not importable, and it is also
imported by the watcher for :func:`prctl` and :func:`shim_argv`.
"""

from __future__ import annotations

# Only built-in modules at run time: `signal` alone would import enum (~4 ms
# of the shim's budget), `collections.abc` and `typing` about as much.
import _signal  # type: ignore[import-not-found]  # (no stub: it is signal's C half)
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    Prctl = Callable[[int, int], tuple[int, int]]

#: prctl options (linux/prctl.h).
PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

#: The signal the child gets when its watcher dies. SIGKILL, not SIGTERM: no
#: watcher is left to follow up on a child that ignores SIGTERM, and a journaled
#: child loses nothing to SIGKILL that it would keep with SIGTERM.
DEATH_SIGNAL: int = _signal.SIGKILL

#: Exit status when the command cannot be executed (the shell's convention).
CANNOT_EXEC = 127


def _raw_prctl() -> Prctl:
    """``prctl`` through ``_ctypes`` alone: the shim's fast path.

    Importing the ``ctypes`` package costs about 4 ms (it defines every C
    type); the shim needs one function with two types. :func:`_ctypes_prctl`
    is the portable twin; a test checks that both arm the same signal.
    """
    import _ctypes

    class Int(_ctypes._SimpleCData):  # type: ignore[type-arg]
        _type_ = "i"

    class ULong(_ctypes._SimpleCData):  # type: ignore[type-arg]
        _type_ = "L"

    class Function(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        _restype_ = Int
        _argtypes_ = (Int, ULong, ULong, ULong, ULong)

    # dlopen(NULL): the symbols of the running program, libc among them.
    call = Function(_ctypes.dlsym(_ctypes.dlopen(None, 0), "prctl"))  # type: ignore[arg-type]
    get_errno = _ctypes.get_errno

    def prctl(option: int, arg: int) -> tuple[int, int]:
        result = int(call(option, arg, 0, 0, 0))
        return result, (get_errno() if result == -1 else 0)

    return prctl


def _ctypes_prctl() -> Prctl:
    """``prctl`` through the ``ctypes`` package: the portable twin of :func:`_raw_prctl`."""
    import ctypes

    call = ctypes.CDLL(None, use_errno=True).prctl
    call.restype = ctypes.c_int
    call.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]

    def prctl(option: int, arg: int) -> tuple[int, int]:
        result = int(call(option, arg, 0, 0, 0))
        return result, (ctypes.get_errno() if result == -1 else 0)

    return prctl


_prctl: Prctl | None = None


def prctl(option: int, arg: int = 0) -> tuple[int, int]:
    """Call Linux ``prctl(option, arg, 0, 0, 0)``; return (its result, errno or 0).

    ``arg`` is passed as an unsigned long (a value or an address).
    """
    global _prctl
    if _prctl is None:
        try:
            _prctl = _raw_prctl()
        except Exception:  # a Python whose _ctypes internals moved: take the long way
            _prctl = _ctypes_prctl()
    return _prctl(option, arg)


def shim_argv(watcher_pid: int, argv: Sequence[str]) -> list[str]:
    """The command that runs ``argv`` through this shim for the watcher ``watcher_pid``."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(watcher_pid), "--", *argv]


def main(args: Sequence[str]) -> int:
    """Arm the death signal, check the parent, exec the command; return only on failure."""
    if len(args) < 3 or args[1] != "--" or not args[0].isdigit():
        print("usage: python -I -S _exec_shim.py WATCHER_PID -- COMMAND...", file=sys.stderr)
        return 2
    watcher, command = int(args[0]), list(args[2:])
    try:
        result, errno = prctl(PR_SET_PDEATHSIG, DEATH_SIGNAL)
        failure = os.strerror(errno) if result != 0 else ""
    except Exception as exc:  # a Python built without ctypes
        failure = f"{type(exc).__name__}: {exc}"
    if failure:
        # Liveness first: the child runs, only without the guarantee.
        print(
            f"lil: warning: cannot arm the parent-death signal ({failure}); "
            f"this child would outlive a killed watcher",
            file=sys.stderr,
        )
    elif os.getppid() != watcher:
        # The watcher died between the fork and the prctl: the signal is now
        # armed against whoever adopted us, so nothing would ever stop us.
        os.kill(os.getpid(), DEATH_SIGNAL)
    # Python ignores SIGPIPE and SIGXFSZ at startup; an ignored signal stays
    # ignored across exec, so hand the command the defaults subprocess gives.
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
    try:
        os.execvp(command[0], command)  # PATH is searched as subprocess would
    except OSError as exc:
        print(f"lil: cannot start {command[0]!r} ({exc})", file=sys.stderr)
    return CANNOT_EXEC


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
