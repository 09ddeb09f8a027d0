"""Which journal file a program and ``lil`` use when none is named: found as git finds ``.git``.

With no ``path=`` / ``--db`` and no ``$LETITLOOP_DB``, the journal is the
nearest ``.letitloop/journal.db`` in the current folder or one of its
parents; when there is none, a new one is made in the current folder. So a
program run from a subfolder of its project, and ``lil`` typed in any folder
under it, use the same file instead of starting a second journal.

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


def default_path() -> str:
    """The journal to use when none is named: the one found (see :func:`find_journal`), as
    ``.letitloop/journal.db`` when it is the current folder's, else its absolute path; or
    ``.letitloop/journal.db`` to be made in the current folder."""
    found = find_journal()
    if found is None or os.path.dirname(os.path.dirname(found)) == os.getcwd():
        return DEFAULT_PATH
    return found


def new_default_journal(path: str) -> str | None:
    """The one line a program prints when it is about to make the default journal here.

    Only for ``.letitloop/journal.db`` (no file named, none found above) that
    does not exist yet, and only when stderr is a terminal: a person learns
    where the file is, and where ``lil`` finds it; a pipe or a log gets
    nothing. None otherwise.
    """
    if os.path.normpath(path) != DEFAULT_PATH or os.path.exists(path):
        return None
    try:
        if not sys.stderr.isatty():
            return None
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return None
    return (
        f"letitloop: new journal {os.path.abspath(path)}; lil finds it from this folder and "
        f"the folders below it"
    )


def found_above(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (as :func:`default_path` gave it) lies above the current folder."""
    return os.path.isabs(path) and os.path.normpath(path) != os.path.abspath(DEFAULT_PATH)
