"""What ``lil check`` checks: ``MODULE[:FUNCTION]`` imported (:func:`load_target`: a dotted
module from the current folder, or a ``.py`` file as ``__main__``) and its ``@durable`` /
``@durable_async`` functions (:func:`durable_functions`), for ``deploycheck.py``."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from ..errors import LetItLoopError, error_text
from ..run.decoration import Durable


def load_target(target: str) -> tuple[ModuleType, str | None, str | None]:
    """``MODULE[:FUNCTION]`` imported: the module, the function's name if given, and what
    importing raised (the module keeps what it defined before).

    A dotted name is imported from the current folder as itself; a ``.py`` file
    as ``__main__``, as ``python file.py`` runs it (its functions are recorded as
    ``__main__.…``), with ``sys.argv`` holding only the file: its ``if __name__ ==
    "__main__":`` block runs too, as in any resume.
    """
    where, _, function = target.partition(":")
    if not where:
        raise LetItLoopError(
            f"expected MODULE[:FUNCTION] (sync_workflow, app.flows:sync, flows.py), got {target!r}"
        )
    as_file = where.endswith(".py") or os.sep in where
    if as_file:
        path = Path(where)
        if not path.is_file():
            raise LetItLoopError(f"expected a Python file at {where!r}, found none")
        name = "__main__"
        spec = importlib.util.spec_from_file_location(name, path)
        folder = str(path.resolve().parent)
    else:
        name = where
        folder = os.getcwd()  # as `python -m` finds the module
        if folder not in sys.path:
            sys.path.insert(0, folder)
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError) as exc:
            raise LetItLoopError(f"cannot find module {name!r}: {exc}") from None
    if spec is None or spec.loader is None:
        raise LetItLoopError(
            f"cannot find module {where!r}; run lil check from the folder that holds it, "
            f"or name its file (lil check path/to/flows.py)"
        )
    if folder not in sys.path:
        sys.path.insert(0, folder)  # its own imports, as when it runs
    module = importlib.util.module_from_spec(spec)
    saved_main, saved_argv = sys.modules.get("__main__"), sys.argv
    sys.modules[name] = module
    if as_file:
        sys.argv = [where]
    failed = None
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a call at import that stopped: keep what it defined
        failed = error_text(exc)
    finally:
        sys.argv = saved_argv
        if as_file and saved_main is not None:
            sys.modules["__main__"] = saved_main
    return module, function or None, failed


def durable_functions(module: ModuleType, function: str | None) -> list[Durable]:
    """The module's durable functions (or the one named), in the module's order."""
    if function is not None:
        found = getattr(module, function, None)
        info = getattr(found, "__letitloop__", None)
        if not isinstance(info, Durable):
            raise LetItLoopError(
                f"{module.__name__}:{function} is not a @durable or @durable_async function "
                f"({'not found' if found is None else type(found).__name__}); name one, or "
                f"check the whole module"
            )
        return [info]
    return [
        v.__letitloop__
        for v in vars(module).values()
        if isinstance(getattr(v, "__letitloop__", None), Durable)
        and getattr(v.__letitloop__.fn, "__module__", None) == module.__name__
    ]
