"""The version of the code an attempt ran: given by the user, or a hash of its module's source.

Each attempt of a run records one (``attempts.version``, docs/versioning.md):
``Journal(goal, version="2026-12-02")`` / ``@durable(..., version=...)`` gives
it; otherwise it is :func:`source_version` of a source file — the decorated
function's file for ``@durable`` (read when it is decorated, at import), the
file of the code that made the ``Journal`` otherwise (the first frame outside
this package, read the first time a journal is made from it). Each file is
read and hashed once per process: a journal's open pays a dict lookup.
"""

from __future__ import annotations

import os
import sys
from types import FrameType

from ..primitives import forksafe
from .names import check_name

try:  # the builtin module: hashlib would load OpenSSL's bindings (~3 ms) for nothing
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without it
    from hashlib import blake2b

#: This library's version (``letitloop.__version__``, the package's __init__.py takes it
#: from here): what a journal file written by a newer release is refused with
#: (stores/sqlite/migration_records.py), read without importing the package's face.
LIBRARY_VERSION = "0.1.0"

#: Hex digits of a source hash kept: 48 bits, as short as git's abbreviations and
#: as unlikely to collide between two versions of one module.
HASH_DIGITS = 12

#: This package's folder (this file is letitloop/identity/versions.py): frames inside it
#: are letitloop's, not the caller's.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

_hashes: dict[str, str | None] = {}
_lock = forksafe.lock()


def source_version(filename: str) -> str | None:
    """The first :data:`HASH_DIGITS` hex digits of the BLAKE2b hash of ``filename``'s bytes.

    Read once per process (then cached): later edits of the file are not seen
    by a process that already runs its code. None for code with no readable
    source (``<stdin>``, ``python -c``, a zip without its sources).
    """
    found = _hashes.get(filename, False)
    if found is not False:
        return found  # type: ignore[return-value]
    try:
        with open(filename, "rb") as f:
            digest: str | None = blake2b(f.read(), digest_size=HASH_DIGITS // 2).hexdigest()
    except (OSError, ValueError):
        digest = None
    with _lock:
        _hashes[filename] = digest
    return digest


def caller_version() -> str | None:
    """:func:`source_version` of the file of the nearest calling frame outside letitloop."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    if frame is None:
        return None
    return source_version(frame.f_code.co_filename)


def check_version(version: object) -> str:
    """``version`` if it is usable as a code version (text as a name is), else InvalidNameError."""
    return check_name("version", version)
