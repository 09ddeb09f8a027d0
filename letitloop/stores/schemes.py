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
``register("scheme", opener, inspector=…)`` with an ``opener(location,
durability)`` that returns a ``storage.Storage`` (no journal module changes)
and, for ``lil`` and ``letitloop.send``/``cancel`` to reach its runs, an
``inspector(location, write, live)`` that returns an
``inspection.Inspector`` (:func:`open_inspector` opens it; no inspection or
command-line module changes). The built-in stores' inspectors
(``inspection/memory_inspector.py``, ``inspection/postgres_inspector.py``) are
named by ``inspection/inspectors.py``, which hands them to :func:`open_inspector`:
this module imports nothing above the stores.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import msgspec

from ..errors import UnknownStoreError

if TYPE_CHECKING:
    from ..inspection.inspector import Inspector
    from .sqlite.pragmas import Durability
    from .storage import ReplayStorage, Storage

#: Makes the storage of one journal's open: ``opener(location, durability)``,
#: ``location`` the whole text of ``path=`` (``memory://tests``).
Opener = Callable[[str, "Durability"], "Storage"]

#: Makes the inspector of an existing journal: ``inspector(location, write, live)``
#: (what ``inspection.open_inspector`` takes: read-only unless ``write``; ``live``
#: for a reader that follows a journal others write).
InspectorOpener = Callable[[str, bool, bool], "Inspector"]


# A msgspec Struct, not a dataclass: made in C, so `import letitloop` neither
# compiles dataclass methods nor loads dataclasses (issue 30).
class StoreEntry(msgspec.Struct, frozen=True):
    """What the registry knows of one scheme's store."""

    opener: Opener
    inspector: InspectorOpener | None = None
    """None: nothing reads its runs from outside them (``lil`` refuses its URLs)."""
    one_process: bool = False
    """Its journals live in the memory of the process that opened them: another
    process (``lil``) reaches nothing there."""


#: ``scheme://``: RFC 3986's scheme (a letter, then letters, digits, ``+ - .``)
#: and the two slashes. A Windows drive (``C:\\``) has none, and ``./x://y``
#: (a relative path on purpose) does not start with a scheme. A pattern, compiled
#: by ``re`` on first use: a path without ``://`` (most) never needs it (issue 30).
_URL = r"([A-Za-z][A-Za-z0-9+.\-]*)://"

#: Stores that ship as an extra of the package (not installed, or not built yet),
#: by scheme: the extra a user installs.
EXTRAS = {"postgresql": "postgres", "postgres": "postgres"}


def _open_memory(location: str, durability: Durability) -> Storage:
    from .memory.storage import open_memory

    return open_memory(location, durability)


def _open_postgres(location: str, durability: Durability) -> Storage:
    from .postgres.storage import open_postgres

    return open_postgres(location, durability)


#: The registered stores, by scheme (lower case).
#: The built-in ones' inspectors are handed to open_inspector by inspection/inspectors.py.
_schemes: dict[str, StoreEntry] = {
    "memory": StoreEntry(_open_memory, None, one_process=True)
}  # The extra letitloop[postgres]: its driver is imported when such a URL is opened
# (_check_extra), and the URL refused as unknown() without it.
_schemes["postgresql"] = _schemes["postgres"] = StoreEntry(_open_postgres, None)


def _check_extra(location: str, scheme: str) -> None:
    """Refuse, as :func:`unknown` does, a URL of a store whose extra is not installed."""
    if EXTRAS.get(scheme) == "postgres":
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise unknown(location, scheme) from None


def register(
    scheme: str,
    opener: Opener,
    *,
    inspector: InspectorOpener | None = None,
    one_process: bool = False,
) -> None:
    """Make ``scheme://…`` paths open the store ``opener`` makes (one registration per scheme).

    ``inspector`` makes what ``lil`` and ``letitloop.send``/``cancel`` read
    and change its runs through (without one they refuse its URLs);
    ``one_process``: its journals live in one process's memory, so ``lil``,
    a process of its own, refuses its URLs. Raises ValueError for a scheme
    that is not one (``"my store"``) or is taken by another opener.
    """
    name = scheme.lower()
    if not re.fullmatch(_URL, name + "://"):
        raise ValueError(
            f"a scheme is a letter, then letters, digits, '+', '-' or '.', got {scheme!r}"
        )
    old = _schemes.get(name)
    if old is not None and old.opener is not opener:
        raise ValueError(f"scheme {name!r} is registered already, to {old.opener!r}")
    _schemes[name] = StoreEntry(opener, inspector, one_process)


def unregister(scheme: str) -> None:
    """Forget the store of ``scheme`` (tests register and forget their own)."""
    _schemes.pop(scheme.lower(), None)


def scheme_of(location: str | os.PathLike[str]) -> str | None:
    """The scheme of a URL (``"postgresql"``, lower case), None for a plain path."""
    if not isinstance(location, str) or "://" not in location:
        return None
    match = re.match(_URL, location)
    return None if match is None else match.group(1).lower()


#: ``password=…`` in a URL's query (libpq's parameter), up to the next ``&``.
_PASSWORD_PARAM = r"([?&]password=)[^&#]*"


def without_password(location: str) -> str:
    """``location`` as shown to a user: a URL's password (``user:pass@`` or
    ``?password=``) left out, anything else as it is."""
    if "://" not in location:
        return location
    head, sep, rest = location.partition("://")
    userinfo, at, tail = rest.partition("@")
    if at and "/" not in userinfo and "?" not in userinfo and ":" in userinfo:
        rest = f"{userinfo.split(':', 1)[0]}@{tail}"
    if "password=" in rest:
        rest = re.sub(_PASSWORD_PARAM, r"\1***", rest)
    return f"{head}{sep}{rest}"


#: ``scheme:`` at the start of a path, for :func:`malformed_url`.
_SCHEME_COLON = r"([A-Za-z][A-Za-z0-9+.\-]*):"
#: ``scheme//`` (the colon left out).
_SCHEME_SLASHES = r"([A-Za-z][A-Za-z0-9+.\-]*)//"


def malformed_url(location: str) -> UnknownStoreError | None:
    """The refusal of a path that starts like a known store's URL but is not one
    (``postgresql:/app@host/db``, ``postgresql//app@…``, ``Postgresql://…``), else None.

    Without it such a path is a folder named ``postgresql:`` with a SQLite file
    in it: a team that believed its hosts shared one journal would get one per
    host. A drive letter (``C:``) is no store's name.
    """
    if ":" not in location and "//" not in location:
        return None  # a plain path: no pattern compiled (a forked child's first open)
    match = re.match(_SCHEME_COLON, location) or re.match(_SCHEME_SLASHES, location)
    if match is None or match.group(1).lower() not in _schemes:
        return None
    name = match.group(1).lower()
    if location.startswith(f"{name}://"):
        return None
    return UnknownStoreError(
        f"{without_password(location)}: expected a URL of the form {name}://…; found a "
        f"malformed one (the scheme in lower case, then '://'). Nothing was created; fix "
        f"the URL (a journal file whose name starts with '{name}' takes a folder: "
        f"./{without_password(location)})",
        location=without_password(location),
        scheme=name,
    )


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
        if _schemes[scheme].one_process
        else "is not a journal file"
    )
    return UnknownStoreError(
        f"{location}: expected a journal file here; found a URL of the {scheme} store, which "
        f"{where}. Nothing was created; pass the path of a journal file",
        location=location,
        scheme=scheme,
    )


#: The SQLite file layer, in the order its modules finish loading (leaf first): it loads
#: at a process's first open (``import letitloop`` leaves it out), which may come from
#: deep in a program's recursion. Imported one by one from one frame, each nests one
#: module's import frames, not a chain of them (four modules deep, ~24 frames):
#: tests/test_codec.py calls a durable run 40 frames below the recursion limit.
_SQLITE_LAYER = (
    "letitloop.stores.sqlite.files",
    "letitloop.stores.sqlite.locks",
    "letitloop.stores.sqlite.migration_files",
    "letitloop.stores.sqlite.migration_records",
    "letitloop.stores.sqlite.migrate",
    "letitloop.stores.sqlite.connect",
    "letitloop.stores.sqlite.goals",
    "letitloop.stores.sqlite.store",
    "letitloop.stores.sqlite.pool",
    "letitloop.stores.storage_runs",
    "letitloop.stores.storage_holding",
    "letitloop.stores.storage_markers",
    "letitloop.stores.storage_schedules",
    "letitloop.stores.storage_streams",
    "letitloop.stores.sqlite.keychecks",
    "letitloop.stores.sqlite.reads",
    "letitloop.stores.sqlite.keys",
    "letitloop.stores.sqlite.markers",
    "letitloop.stores.sqlite.calls",
    "letitloop.stores.sqlite.pauses",
    "letitloop.stores.sqlite.spend",
    "letitloop.stores.sqlite.runs",
    "letitloop.stores.sqlite.steps",
    "letitloop.stores.sqlite.chain",
    "letitloop.stores.sqlite.schedules",
    "letitloop.stores.sqlite.holding",
    "letitloop.stores.sqlite.streams",
    "letitloop.stores.sqlite.storage",
)


def _load_sqlite_layer() -> None:
    if _SQLITE_LAYER[-1] not in sys.modules:
        for name in _SQLITE_LAYER:
            __import__(name)


def open_storage(path: str | os.PathLike[str] | None, durability: Durability) -> Storage:
    """The storage ``path`` names: ``path``, else ``$LETITLOOP_DB``, else the default file.

    A URL opens its scheme's store, or raises UnknownStoreError; anything
    else is a SQLite journal file (``sqlite_storage.open_sqlite``).
    """
    location = path if path is not None else os.environ.get("LETITLOOP_DB") or None
    if isinstance(location, str):
        bad = malformed_url(location)
        if bad is not None:
            raise bad
        scheme = scheme_of(location)
        if scheme is not None:
            entry = _schemes.get(scheme)
            if entry is None:
                raise unknown(location, scheme)
            _check_extra(location, scheme)
            return entry.opener(location, durability)
    _load_sqlite_layer()
    from .sqlite.storage import open_sqlite

    return open_sqlite(path, durability)


def open_readonly_storage(path: str | os.PathLike[str] | None) -> ReplayStorage:
    """The storage a replay-only journal reads: a SQLite journal file opened for reading only.

    Raises UnrecordedStepError for a URL (only a journal file is replayed
    read-only), JournalFileError for a file that is missing or unusable.
    """
    location = path if path is not None else os.environ.get("LETITLOOP_DB") or None
    if isinstance(location, str) and scheme_of(location) is not None:
        from ..errors import UnrecordedStepError

        raise UnrecordedStepError(
            f"replay-only journals read a journal file, got the URL {location!r}; copy the "
            f"run into a file and replay that, or open it without replay_only"
        )
    _load_sqlite_layer()
    from .sqlite.storage import open_sqlite_readonly

    return open_sqlite_readonly(path)


def open_inspector(
    location: str,
    *,
    write: bool,
    live: bool,
    separate_process: bool,
    built_in: Mapping[str, InspectorOpener],
) -> Inspector:
    """The inspector of the journal at the URL ``location`` (``inspection.open_inspector``).

    ``built_in``: the built-in stores' inspectors by scheme (the memory store's,
    PostgreSQL's), which the inspection package names. ``separate_process``: the
    caller is a process of its own (``lil``), not one of the program's, so a store
    that lives in one process's memory reaches nothing. Raises UnknownStoreError for
    a scheme with no store, a store with no inspector, or (``separate_process``) one
    that lives in one process; nothing is created then.
    """
    scheme = scheme_of(location)
    assert scheme is not None, location
    entry = _schemes.get(scheme)
    if entry is None:
        raise unknown(location, scheme)
    _check_extra(location, scheme)
    if entry.one_process and separate_process:
        raise not_a_file(location, scheme)
    inspector = entry.inspector or built_in.get(scheme)
    if inspector is None:
        raise UnknownStoreError(
            f"{location}: expected a store whose runs can be read from outside them; found a "
            f"URL of the {scheme} store, which was registered without an inspector, so lil, "
            f"letitloop.send and letitloop.cancel cannot read or change its runs. Nothing was "
            f"created; register it with inspector= (letitloop.stores.schemes.register)",
            location=location,
            scheme=scheme,
        )
    return inspector(location, write, live)
