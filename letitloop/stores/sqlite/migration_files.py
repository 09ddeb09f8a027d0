"""The numbered SQL files of ``migrations/``: where they are, which there are, in order.

:func:`known_names` lists them without reading them (what :func:`migrate.check`
needs on every open), :func:`known_migrations` reads them once per process;
:func:`set_migrations` lists an adapter's own set the same way.
"""

from __future__ import annotations

import os
from functools import lru_cache

from ...errors import JournalFileError

#: The characters of a migration file's name after its number and underscore.
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def is_migration_file(name: str) -> bool:
    """``0001_initial.sql``: four digits, ``_``, then lowercase letters, digits and ``_``.

    String tests, not a regular expression: every open lists the folder
    (:func:`known_names`), and compiling one cost every import (issue 30).
    """
    stem = name[:-4]
    return (
        name.endswith(".sql")
        and len(stem) > 5
        and stem[:4].isascii()
        and stem[:4].isdigit()
        and stem[4] == "_"
        and not stem[5:].strip(_NAME_CHARS)
    )


def migrations_dir() -> str:
    """The folder of numbered SQL files: inside the installed wheel, or the source checkout's."""
    return _installed_migrations()


@lru_cache(maxsize=1)
def _installed_migrations() -> str:
    # Found once per process: every open lists the folder (known_names), and
    # resolving this file's path took four lstat() calls and a stat() each time.
    # Text, not a Path: every open reads it, and pathlib is left unloaded (files.py).
    # This file is letitloop/stores/sqlite/migration_files.py: the package is 3 folders up.
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    packaged = os.path.join(package, "migrations")
    if os.path.isdir(packaged):
        return packaged
    return os.path.join(os.path.dirname(package), "migrations")


@lru_cache(maxsize=1)
def known_migrations() -> tuple[tuple[str, str], ...]:
    """``(name, sql)`` of every migration this version knows, in order."""
    folder = migrations_dir()
    return tuple((name, read(os.path.join(folder, f"{name}.sql"))) for name in known_names())


def known_names() -> list[str]:
    """The names of the migrations this version knows, in order, without reading them.

    What :func:`check` needs on every open: listing the folder costs a
    resume a fraction of reading each file (:func:`known_migrations`).
    """
    folder = migrations_dir()
    # os.listdir, not Path.glob: glob compiles a pattern, which costs a resume a millisecond.
    names = sorted(name[:-4] for name in os.listdir(folder) if is_migration_file(name))
    if not names:
        raise JournalFileError(f"no migrations found in {folder}; the installation is broken")
    return names


def schema_version() -> int:
    """The number of the newest migration this version knows."""
    return int(known_names()[-1][:4])


def set_migrations(folder: str | os.PathLike[str]) -> tuple[tuple[str, str], ...]:
    """``(name, sql)`` of the numbered SQL files in ``folder``, in order: an adapter's set."""
    names = sorted(name[:-4] for name in os.listdir(folder) if is_migration_file(name))
    return tuple((name, read(os.path.join(folder, f"{name}.sql"))) for name in names)


def read(path: str | os.PathLike[str]) -> str:
    """A migration file's text (without pathlib, which a journal's open leaves unloaded)."""
    with open(path, encoding="utf-8") as f:
        return f.read()
