"""Which journal file a program and ``lil`` use when none is named: found as git finds ``.git``.

With no ``path=`` / ``--db`` and no ``$LETITLOOP_DB``, the journal is the
nearest ``.letitloop/journal.db`` in the current folder or one of its
parents; when there is none and the program is a script
(``python path/to/sync.py``), the nearest one at the script's folder or
above; when there is none either, a new one is made beside the script (in
the current folder for ``python -m``, ``-c``, the REPL, a notebook). So a
program run from a subfolder of its project, or from any folder at all
(cron, a systemd unit, an IDE), and ``lil`` typed in any folder under the
journal's, use the same file instead of starting a second journal; a journal
already in the current folder stays the one used. ``lil watch SCRIPT``
applies the rule for SCRIPT. Making the file says so on stderr, once.

The search stops where a project ends, so that a journal above it is never
taken by surprise: after a folder that holds ``.git`` (the repository's
root), at the filesystem root, and before the home folder and any folder
named in ``$LETITLOOP_CEILING_DIRECTORIES`` (``:``-separated, as git's
``GIT_CEILING_DIRECTORIES``): it does not look in them or above. The home
folder is left out because running any script there once makes
``~/.letitloop/journal.db``, which every project under it would then share;
a program run in the home folder itself still uses its own.
"""

from __future__ import annotations

import os
import sys

#: The journal's place under the folder it belongs to.
FOLDER, NAME = ".letitloop", "journal.db"
#: The default path, relative to the current folder.
DEFAULT_PATH = os.path.join(FOLDER, NAME)


def _ceilings() -> set[str]:
    """The folders the search never enters: ``$LETITLOOP_CEILING_DIRECTORIES``."""
    text = os.environ.get("LETITLOOP_CEILING_DIRECTORIES", "")
    return {os.path.abspath(p) for p in text.split(os.pathsep) if p}


def find_journal(start: str | os.PathLike[str] | None = None) -> str | None:
    """The nearest existing ``.letitloop/journal.db`` at ``start`` (the current folder) or
    above it, within the project (see the module's docstring); None when there is none.

    Strings and ``os`` calls, not ``Path``s: it runs on every ``Journal`` open
    that names no file (a few microseconds per folder).
    """
    folder = os.path.abspath(start if start is not None else os.getcwd())
    home = os.path.abspath(os.environ["HOME"]) if os.environ.get("HOME") else None
    stop = _ceilings()
    isfile, exists, join = os.path.isfile, os.path.exists, os.path.join
    first = folder
    while True:
        if folder in stop or (folder == home and folder != first):
            return None
        candidate = join(folder, FOLDER, NAME)
        if isfile(candidate):
            return candidate
        if folder == home or exists(join(folder, ".git")):
            return None
        parent = os.path.dirname(folder)
        if parent == folder:  # the filesystem root
            return None
        folder = parent


def script_folder(file: str | None = None) -> str | None:
    """The folder of the script ``file``, else of the one this process runs
    (``python path/to/sync.py``); None when it is not a script of the user's.

    None for ``python -m MODULE`` (``__main__`` has a spec), ``python -c``,
    the REPL and notebooks (no ``__main__.__file__``), a folder or zip file run
    as a program, and a console command of an installed package (``pytest``,
    ``uvicorn``, ``lil``: a file under the Python installation or the virtual
    environment, ``sys.prefix`` and its kin).
    """
    if file is None:
        main = sys.modules.get("__main__")
        if main is None or getattr(main, "__spec__", None) is not None:
            return None
        file = getattr(main, "__file__", None)
        if type(file) is not str or not file:
            return None
    elif not os.path.isfile(file):
        return None
    folder = os.path.dirname(os.path.abspath(file))
    for prefix in {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}:
        if prefix and (folder == prefix or folder.startswith(prefix.rstrip(os.sep) + os.sep)):
            return None
    return folder


#: The default journal this process chose to make (absolute), so that making it says so once.
_chosen_new: str | None = None


def default_path(script: str | None = None) -> str:
    """The journal to use when none is named, by the rule of the module's docstring:

    1. the nearest ``.letitloop/journal.db`` at the current folder or above
       (:func:`find_journal`), as ``.letitloop/journal.db`` when it is the
       current folder's, else its absolute path;
    2. else, for a script (``script``, the path of the one ``lil watch`` runs,
       or else this process's own: :func:`script_folder`), the nearest one at
       the script's folder or above;
    3. else a new one beside the script (absolute), or in the current folder
       (``.letitloop/journal.db``) when there is no script.

    So a script finds the same file from whatever folder it is run (cron, a
    service, an IDE), and a journal already in the current folder stays the one used.
    """
    global _chosen_new
    cwd = os.getcwd()
    found = find_journal(cwd)
    if found is not None:
        return DEFAULT_PATH if os.path.dirname(os.path.dirname(found)) == cwd else found
    folder = script_folder(script)
    if folder is not None and folder != cwd:
        found = find_journal(folder)
        if found is not None:
            return found
    if folder is None or folder == cwd:
        _chosen_new = os.path.join(cwd, DEFAULT_PATH)
        return DEFAULT_PATH
    _chosen_new = os.path.join(folder, DEFAULT_PATH)
    return _chosen_new


def new_default_journal(path: str) -> str | None:
    """The one line a program prints (on stderr) when it is about to make the default journal.

    Only for the file :func:`default_path` chose to make (no file named, none
    found) and only while it does not exist: where the file is, and from where
    ``lil`` finds it. None otherwise.
    """
    made = os.path.abspath(path)
    if made != _chosen_new or os.path.exists(made):
        return None
    owner = os.path.dirname(os.path.dirname(made))
    return f"letitloop: new journal {made} (lil finds it from {owner} and the folders below it)"


def found_above(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (as :func:`default_path` gave it) lies above the current folder."""
    return os.path.isabs(path) and os.path.normpath(path) != os.path.abspath(DEFAULT_PATH)
