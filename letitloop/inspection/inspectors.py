"""Which :class:`~letitloop.inspection.inspector.Inspector` a journal's path gets: the one
place ``lil`` and the library open a journal to see or change its runs from outside
(:func:`open_inspector`).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..stores import schemes
from .inspector import Inspector
from .journalfile import open_journal_file
from .sqlite_inspector import SqliteInspector


def _inspect_memory(location: str, write: bool, live: bool) -> Inspector:
    from .memory_inspector import open_memory_inspector

    return open_memory_inspector(location, write=write)


def _inspect_postgres(location: str, write: bool, live: bool) -> Inspector:
    from .postgres_inspector import open_postgres_inspector

    return open_postgres_inspector(location, write=write, live=live)


#: The built-in stores' inspectors, by scheme (stores/schemes.py registers their openers),
#: each imported when a journal of that store is first inspected.
BUILT_IN = {
    "memory": _inspect_memory,
    "postgresql": _inspect_postgres,
    "postgres": _inspect_postgres,
}


def open_inspector(
    path: str | Path | None = None,
    *,
    write: bool = False,
    live: bool = False,
    separate_process: bool = False,
) -> Inspector:
    """An inspector of the existing journal at ``path`` (default: as for ``Journal``).

    Read-only by default: nothing is written, not even a lock file;
    ``write=True`` for the commands that change runs (reset, fork, gc, send,
    cancel, upgrade); ``live`` for a reader that follows a journal others
    write (``lil show --follow``). Raises JournalFileError when there is no
    journal there (see :func:`open_journal_file`).

    A plain path is a journal file, read by :class:`SqliteInspector`; a URL
    (``scheme://…``, as ``path`` or ``LETITLOOP_DB``) gets the inspector
    registered for its scheme (``schemes.register(…, inspector=…)``;
    ``memory://NAME``: :class:`~letitloop.inspection.memory_inspector.MemoryInspector`),
    or UnknownStoreError for a store registered without one.
    ``separate_process``: the caller is a process of its own (``lil``), which
    reaches no store that lives in one process's memory (UnknownStoreError).
    """
    location = path if path is not None else os.environ.get("LETITLOOP_DB") or None
    bad = schemes.malformed_url(location) if isinstance(location, str) else None
    if bad is not None:
        raise bad
    if isinstance(location, str) and schemes.scheme_of(location) is not None:
        return schemes.open_inspector(
            location, write=write, live=live, separate_process=separate_process, built_in=BUILT_IN
        )
    return SqliteInspector(open_journal_file(path, write=write, live=live))
