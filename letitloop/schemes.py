"""Which store a journal's ``path=`` names: the one place a path or URL chooses its store.

A plain path (``jobs.db``, ``/var/lib/app/journal.db``; also ``LETITLOOP_DB``
and the default ``.letitloop/journal.db``) is a SQLite journal file. A path
that looks like a URL, ``scheme://…``, is never a file: it is the store
registered for its scheme (:func:`register`), or it is refused with
:class:`~letitloop.errors.UnknownStoreError`, which names the schemes this
installation has and, for a store that ships as an extra, what to install.
Before this registry, ``path="postgresql://app@db/jobs"`` made a folder named
``postgresql:`` and journalled there.

Built in: ``memory://NAME``, the in-memory store (``memory_storage.py``),
which lives in one process and is there for tests. Adding a store is
``register("scheme", opener)`` with an ``opener(location, durability)`` that
returns a ``storage.Storage``; no journal module changes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import UnknownStoreError

if TYPE_CHECKING:
    from .pragmas import Durability
    from .storage import Storage

#: Makes the storage of one journal's open: ``opener(location, durability)``,
#: ``location`` the whole text of ``path=`` (``memory://tests``).
Opener = Callable[[str, "Durability"], "Storage"]

#: ``scheme://``: RFC 3986's scheme (a letter, then letters, digits, ``+ - .``)
#: and the two slashes. A Windows drive (``C:\\``) has none, and ``./x://y``
#: (a relative path on purpose) does not start with a scheme.
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")

#: Stores that ship as an extra of the package (not installed, or not built yet),
#: by scheme: the extra a user installs.
EXTRAS = {"postgresql": "postgres", "postgres": "postgres"}


def _open_memory(location: str, durability: Durability) -> Storage:
    from .memory_storage import open_memory

    return open_memory(location, durability)


#: The registered stores, by scheme (lower case).
_schemes: dict[str, Opener] = {"memory": _open_memory}


def register(scheme: str, opener: Opener) -> None:
    """Make ``scheme://…`` paths open the store ``opener`` makes (one registration per scheme).

    Raises ValueError for a scheme that is not one (``"my store"``) or is
    taken by another opener.
    """
    name = scheme.lower()
    if not _URL.fullmatch(name + "://"):
        raise ValueError(
            f"a scheme is a letter, then letters, digits, '+', '-' or '.', got {scheme!r}"
        )
    if _schemes.get(name, opener) is not opener:
        raise ValueError(f"scheme {name!r} is registered already, to {_schemes[name]!r}")
    _schemes[name] = opener


def unregister(scheme: str) -> None:
    """Forget the store of ``scheme`` (tests register and forget their own)."""
    _schemes.pop(scheme.lower(), None)


def scheme_of(location: str | os.PathLike[str]) -> str | None:
    """The scheme of a URL (``"postgresql"``, lower case), None for a plain path."""
    match = _URL.match(os.fspath(location)) if isinstance(location, str) else None
    return None if match is None else match.group(1).lower()


def supported() -> str:
    """The stores this installation opens, as a message lists them."""
    urls = ", ".join(f"{s}://…" for s in sorted(_schemes))
    return f"a file path (SQLite){', or a URL: ' + urls if urls else ''}"


def unknown(location: str, scheme: str) -> UnknownStoreError:
    """The refusal of a URL whose scheme no store is registered for; nothing is created."""
    extra = EXTRAS.get(scheme)
    if extra is not None:
        hint = (
            f"the {scheme} store is the extra letitloop[{extra}] (in a checkout: "
            f"pip install -e '.[{extra}]'), which this installation does not have"
        )
    else:
        hint = f"letitloop has no store for {scheme}:// URLs"
    return UnknownStoreError(
        f"{location}: expected {supported()}; found a URL of scheme {scheme!r}, and {hint}. "
        f"Nothing was created; pass a supported path or URL (path= or LETITLOOP_DB)",
        location=location,
        scheme=scheme,
    )


def not_a_file(location: str, scheme: str) -> UnknownStoreError:
    """The refusal of a URL where only a journal file will do (``lil``, the LangGraph saver)."""
    if scheme not in _schemes:
        return unknown(location, scheme)
    where = (
        "lives in the memory of the process that opened it, so nothing else reaches it"
        if scheme == "memory"
        else "is not a journal file"
    )
    return UnknownStoreError(
        f"{location}: expected a journal file here; found a URL of the {scheme} store, which "
        f"{where}. Nothing was created; pass the path of a journal file",
        location=location,
        scheme=scheme,
    )


def open_storage(path: str | os.PathLike[str] | None, durability: Durability) -> Storage:
    """The storage ``path`` names: ``path``, else ``$LETITLOOP_DB``, else the default file.

    A URL opens its scheme's store, or raises UnknownStoreError; anything
    else is a SQLite journal file (``sqlite_storage.open_sqlite``).
    """
    location = path if path is not None else os.environ.get("LETITLOOP_DB") or None
    if isinstance(location, str):
        scheme = scheme_of(location)
        if scheme is not None:
            opener = _schemes.get(scheme)
            if opener is None:
                raise unknown(location, scheme)
            return opener(location, durability)
    from .sqlite_holding import open_sqlite

    return open_sqlite(path, durability)
