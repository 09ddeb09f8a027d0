"""The rows a fork copies, bound to its new run, on a store that keeps rows as named columns
(the memory store and PostgreSQL, through ``MemoryInspector.fork``): what
``sqlite_changes.bind_copied_rows`` does in SQL for a journal file.

Each encrypted value is bound to its run (letitloop/integrity/encryption.py), so a copy
is decrypted and encrypted again for the new run, with
``LETITLOOP_ENCRYPTION_KEY``; each copy gets its checksum for the new run
(letitloop/integrity/checksums.py), so its replay is checked as the source's was.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import EncryptionKeyError
from ..integrity.checksums import marker_sum, pause_sum, step_sum
from ..integrity.encryption import encrypted, env_cipher
from .records import RunInfo

__all__ = ["ENCRYPTED_FIELDS", "bind_copies", "checksum", "key_needed"]

#: The fields of a row that may be stored encrypted.
ENCRYPTED_FIELDS = ("result", "error", "traceback")


def bind_copies(copies: Iterable[dict[str, Any]], source: RunInfo, new_id: str) -> None:
    """Bind ``copies`` (rows of run ``source`` by column name, each with its ``key``, not yet
    stored) to run ``new_id``, in place: encrypted values encrypted again for it, checksums
    made for it. Raises EncryptionKeyError, changing none, when a copy holds an encrypted
    value and ``LETITLOOP_ENCRYPTION_KEY`` is not set (or is another key)."""
    rows = list(copies)
    if any(encrypted(row.get(f)) for row in rows for f in ENCRYPTED_FIELDS):
        cipher = env_cipher()
        if cipher is None:
            raise key_needed(source)
        again = [
            {
                f: cipher.seal(cipher.open(row[f], source.id, row["key"], f), new_id, row["key"], f)
                for f in ENCRYPTED_FIELDS
                if encrypted(row.get(f))
            }
            for row in rows
        ]  # every value opened before any copy changes: a wrong key changes none
        for row, values in zip(rows, again, strict=True):
            row.update(values)
    for row in rows:
        row["checksum"] = checksum(row, new_id)


def key_needed(source: RunInfo) -> EncryptionKeyError:
    """The refusal of a fork of encrypted run ``source`` without ``LETITLOOP_ENCRYPTION_KEY``
    (every store's: ``sqlite_changes.py`` raises it too)."""
    return EncryptionKeyError(
        f"run {source.id} of goal {source.goal!r}: its values are encrypted, each bound "
        f"to its run, so a fork's copies must be encrypted again for the new run: "
        f"expected the key in LETITLOOP_ENCRYPTION_KEY; nothing was forked",
        run_id=source.id,
    )


def checksum(row: dict[str, Any], run_id: str) -> int | None:
    """The checksum of ``row`` as a row of run ``run_id`` (None for a kind that has none)."""
    kind, key, status = row["kind"], row["key"], row["status"]
    if kind == "step":
        return step_sum(run_id, key, status, row["fn"], row["args_fp"], row["result"], row["error"])
    if kind == "marker":
        return marker_sum(run_id, key, status)
    if kind in ("sleep", "wait"):
        return pause_sum(run_id, key, kind, row["result"], row["error"])
    return None
