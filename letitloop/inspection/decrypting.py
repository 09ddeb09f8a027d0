"""Encrypted values as a reader shows them: decrypted with ``LETITLOOP_ENCRYPTION_KEY``, else
a note (letitloop/integrity/encryption.py). What the in-memory and PostgreSQL inspectors show in
``lil show``, ``lil export`` and ``lil ui``, as the SQLite inspector does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..errors import EncryptionKeyError
from ..integrity.encryption import encrypted, env_cipher
from .records import RowInfo

__all__ = ["ENCRYPTED_NOTE", "Decrypting"]

#: What a reader shows for an encrypted error or input without the key.
ENCRYPTED_NOTE = "(encrypted: set LETITLOOP_ENCRYPTION_KEY to read it)"

#: The cipher before it is first needed.
_UNREAD = object()


class Decrypting:
    """An inspector's reading of encrypted values; the key is read from the environment the
    first time an encrypted value is met (a journal without one never loads the cipher)."""

    def __init__(self) -> None:
        self._cipher: Any = _UNREAD

    def text(self, text: Any, run_id: str, key: str, field: str) -> Any:
        """Stored text as a reader shows it: decrypted with the key; without it (or with
        another) a value (JSON) stays as stored, which ``inspection.results`` shows as
        encrypted, and a text (an error, a traceback) becomes a note. Text not encrypted,
        as it is."""
        if not encrypted(text):
            return text
        if self._cipher is _UNREAD:
            self._cipher = env_cipher()
        value = field in ("result", "input", "run result")
        if self._cipher is None:
            return text if value else ENCRYPTED_NOTE
        try:
            return self._cipher.open(text, run_id, key, field)
        except EncryptionKeyError as exc:
            return text if value else f"(unreadable: {exc})"

    def row(self, info: RowInfo, run_id: str) -> RowInfo:
        """A row with its result, error and traceback as a reader shows them."""
        if not (encrypted(info.result) or encrypted(info.error) or encrypted(info.traceback)):
            return info
        return replace(
            info,
            result=self.text(info.result, run_id, info.key, "result"),
            error=self.text(info.error, run_id, info.key, "error"),
            traceback=self.text(info.traceback, run_id, info.key, "traceback"),
        )
