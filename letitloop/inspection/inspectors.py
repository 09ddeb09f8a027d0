"""Which :class:`~letitloop.inspection.inspector.Inspector` a journal's path gets: the one
place ``lil`` and the library open a journal to see or change its runs from outside
(:func:`open_inspector`).
"""

from __future__ import annotations

from pathlib import Path

from .inspector import Inspector
from .journalfile import open_journal_file
from .sqlite_inspector import SqliteInspector


def open_inspector(
    path: str | Path | None = None, *, write: bool = False, live: bool = False
) -> Inspector:
    """An inspector of the existing journal at ``path`` (default: as for ``Journal``).

    Read-only by default: nothing is written, not even a lock file;
    ``write=True`` for the commands that change runs (reset, fork, gc, send,
    cancel, upgrade); ``live`` for a reader that follows a journal others
    write (``lil show --follow``). Raises JournalFileError when there is no
    journal there (see :func:`open_journal_file`). Today every path is a
    journal file, read by :class:`SqliteInspector`; a store chosen by the
    path's scheme plugs in here, and nowhere else.
    """
    return SqliteInspector(open_journal_file(path, write=write, live=live))
