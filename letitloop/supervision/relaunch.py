"""How to start a program again under supervision: the child's command line.

For ``lil watch SCRIPT`` / ``lil watch -m MODULE`` (:func:`script_argv`,
:func:`module_argv`) and for ``@supervise``, which re-runs the program it is
in (:func:`program_argv`), refusing what cannot be re-run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import SupervisorError


def script_argv(script: str, args: Iterable[str]) -> list[str]:
    """The child command for ``lil watch SCRIPT ARGS``; refuses a missing script."""
    path = Path(script)
    if not path.exists():
        raise SupervisorError(
            f"expected a Python script to watch, found no file {script!r} "
            f"(in {os.getcwd()}); check the path, or use -m MODULE for a module"
        )
    if path.is_dir() and not (path / "__main__.py").exists():
        raise SupervisorError(
            f"expected a Python script to watch, found the folder {script!r} with no "
            f"__main__.py; name the script, or use -m MODULE for a package"
        )
    return [sys.executable, script, *args]


def module_argv(module: str, args: Iterable[str]) -> list[str]:
    """The child command for ``lil watch -m MODULE ARGS``; refuses an unknown top package.

    Only the top-level name is looked up (that runs no code); a missing
    submodule shows up as the child's own error.
    """
    import importlib.machinery
    import importlib.util

    top = module.split(".")[0]
    if not top.isidentifier():
        raise SupervisorError(
            f"expected a module name such as mypackage.pipeline after -m, got {module!r}"
        )
    # The child runs `python -m`, which puts the current folder first on sys.path.
    found = (
        top in sys.builtin_module_names
        or importlib.machinery.PathFinder.find_spec(top, [os.getcwd(), *sys.path]) is not None
    )
    if not found:
        raise SupervisorError(
            f"expected an importable module after -m, found no module {top!r} in the current "
            f"folder or on sys.path; check the name, PYTHONPATH, or the folder you run lil from"
        )
    return [sys.executable, "-m", module, *args]


#: Python's options that take a value (``-W ignore``, ``-X dev``, ``-c cmd``, ``-m mod``).
_OPTIONS_WITH_VALUE = "cmWX"


def program_argv(orig_argv: Sequence[str], main_file: str | None) -> tuple[list[str], str]:
    """How to start this program again: (the argv after the interpreter, a display name).

    ``orig_argv`` is ``sys.orig_argv`` (the interpreter's own command line);
    ``main_file`` is ``__main__.__file__`` (absolute since Python 3.9), used
    so that a script given by a relative path still runs after a chdir.
    Raises SupervisorError for a program that cannot be started again: a
    ``-c`` command, a script read from stdin, an interactive interpreter.
    """
    args = list(orig_argv[1:])
    flags: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a.startswith("--"):
            flags.append(a)
            if a == "--check-hash-based-pycs" and i + 1 < len(args):
                flags.append(args[i + 1])
                i += 1
            i += 1
            continue
        if a.startswith("-") and a != "-":
            for j in range(1, len(a)):
                ch = a[j]
                if ch in _OPTIONS_WITH_VALUE:
                    value = a[j + 1 :]
                    used = 1
                    if not value:
                        value = args[i + 1] if i + 1 < len(args) else ""
                        used = 2
                    head = a[:j]
                    if ch == "m":
                        if head != "-":
                            flags.append(head)
                        return [*flags, "-m", value, *args[i + used :]], value
                    if ch == "c":
                        raise SupervisorError(
                            "@supervise cannot re-run a 'python -c' command; put the code in "
                            "a script (python script.py) or run it under 'lil watch'"
                        )
                    flags.append(a)
                    if used == 2:
                        flags.append(value)
                    i += used
                    break
            else:
                # Only flags without values; -i would make the child interactive.
                cluster = "-" + a[1:].replace("i", "")
                if cluster != "-":
                    flags.append(cluster)
                i += 1
            continue
        break
    if i >= len(args) or args[i] == "-":
        raise SupervisorError(
            "@supervise cannot re-run a program read from stdin or typed at an interactive "
            "prompt; save it as a script and run 'python script.py' or 'lil watch script.py'"
        )
    script = args[i]
    if main_file and Path(main_file).name == Path(script).name:
        script = main_file
    return [*flags, script, *args[i + 1 :]], Path(args[i]).name


def refuse_interactive() -> None:
    """Raise SupervisorError in a REPL, IPython or a notebook, where no program can re-run."""
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None) if ipython else None
    if (get_ipython is not None and get_ipython() is not None) or "ipykernel" in sys.modules:
        raise SupervisorError(
            "@supervise cannot restart a notebook or IPython session (there is no program "
            "to run again); move the code into a script and run 'lil watch script.py'"
        )
    if hasattr(sys, "ps1") or (sys.flags.inspect and not sys.argv[0]):
        raise SupervisorError(
            "@supervise cannot restart an interactive session (there is no program to run "
            "again); save the code as a script and run 'python script.py' or "
            "'lil watch script.py'"
        )


def supervised_child() -> bool:
    """True inside a child started by ``lil watch`` or ``@supervise``."""
    return os.environ.get("LETITLOOP_SUPERVISED") == "1"
