"""Encryption at rest (opt-in): recorded values stored as AES-GCM ciphertext, bound to their row.

With a key (``Journal(..., encryption_key=key)`` or ``LETITLOOP_ENCRYPTION_KEY``)
a step's result, error and traceback are written encrypted: the stored text is
``{"!enc":"v1:<base64 of nonce and ciphertext>"}`` (JSON, a tag no result can
hold: the codec escapes a user's ``!`` keys). The associated data is the run's
id, the step's key and the field, so a ciphertext copied into another row (or
another field) fails to decrypt instead of being replayed there. Names,
statuses and times stay readable, so ``lil runs`` works without the key.

The AES-256 key is derived from the given secret with HKDF-SHA256. The cipher
is ``cryptography``'s (the ``encryption`` extra), imported only when a key is
given: a journal without one never loads it.
"""

from __future__ import annotations

import base64
import os
from typing import Any, overload

from ..errors import EncryptionKeyError

__all__ = [
    "ENCRYPTION_KEY_ENV",
    "NEW_ENCRYPTION_KEY_ENV",
    "Cipher",
    "encrypted",
    "env_cipher",
    "key_refusal",
    "make_cipher",
]

#: The environment variable holding the encryption key (text, used as its UTF-8 bytes).
ENCRYPTION_KEY_ENV = "LETITLOOP_ENCRYPTION_KEY"

#: The environment variable holding the new key of ``lil rekey``.
NEW_ENCRYPTION_KEY_ENV = "LETITLOOP_NEW_ENCRYPTION_KEY"

#: The HKDF label of a key's check value: derived from the key like the AES key, under
#: another label, so it tells keys apart and reveals nothing of the AES key.
_CHECK_INFO = b"letitloop-key-check-v1"

#: How an encrypted value's stored text starts.
PREFIX = '{"!enc":"v1:'
_SUFFIX = '"}'

#: Keys shorter than this are refused.
MIN_KEY_BYTES = 16

#: AES-GCM's nonce: 12 random bytes per value (2**-32 collision bound far beyond any journal).
_NONCE = 12


def encrypted(text: str | None) -> bool:
    """Whether stored text is an encrypted value."""
    return text is not None and text.startswith(PREFIX)


class Cipher:
    """AES-256-GCM under a key derived from the secret; encrypts and decrypts stored text."""

    def __init__(self, secret: bytes) -> None:
        try:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF
        except ImportError:
            raise EncryptionKeyError(
                "an encryption key was given (encryption_key= or LETITLOOP_ENCRYPTION_KEY), "
                "but the 'cryptography' package is not installed: install the 'encryption' extra "
                "(pip install -e '.[encryption]' in a checkout), or unset the key"
            ) from None
        derived = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=b"letitloop-encryption-v1"
        ).derive(secret)
        self._aead = AESGCM(derived)
        #: The key's check value (hex), stored once per goal so that another key is refused
        #: when a journal opens, not at the first replay: never the key, nor the AES key.
        self.check = (
            HKDF(algorithm=hashes.SHA256(), length=16, salt=None, info=_CHECK_INFO)
            .derive(secret)
            .hex()
        )

    @staticmethod
    def _data(run_id: str, key: str, field: str) -> bytes:
        return f"letitloop-v1\x1f{run_id}\x1f{key}\x1f{field}".encode("utf-8", "surrogatepass")

    @overload
    def seal(self, text: str, run_id: str, key: str, field: str) -> str: ...
    @overload
    def seal(self, text: None, run_id: str, key: str, field: str) -> None: ...
    @overload
    def seal(self, text: str | None, run_id: str, key: str, field: str) -> str | None: ...
    def seal(self, text: str | None, run_id: str, key: str, field: str) -> str | None:
        """``text`` encrypted for row (``run_id``, ``key``) and ``field``; None stays None."""
        if text is None:
            return None
        nonce = os.urandom(_NONCE)
        body = self._aead.encrypt(
            nonce, text.encode("utf-8", "surrogatepass"), self._data(run_id, key, field)
        )
        return PREFIX + base64.b64encode(nonce + body).decode("ascii") + _SUFFIX

    @overload
    def open(self, text: str, run_id: str, key: str, field: str) -> str: ...
    @overload
    def open(self, text: None, run_id: str, key: str, field: str) -> None: ...
    @overload
    def open(self, text: str | None, run_id: str, key: str, field: str) -> str | None: ...
    def open(self, text: str | None, run_id: str, key: str, field: str) -> str | None:
        """The text stored encrypted for this row and field; text not encrypted is returned
        as is. EncryptionKeyError when it does not decrypt here."""
        if text is None or not text.startswith(PREFIX):
            return text
        try:
            raw = base64.b64decode(text[len(PREFIX) : -len(_SUFFIX)], validate=True)
            plain = self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], self._data(run_id, key, field))
        except Exception:  # InvalidTag, or damaged base64: either way not this row's value
            what = f"{field} of {key!r}" if key else f"the {field}"
            raise EncryptionKeyError(
                f"{what} (run {run_id}): it is encrypted and does not decrypt "
                f"with this key for this row: expected the key it was written with "
                f"(encryption_key= or LETITLOOP_ENCRYPTION_KEY); if it is that key, the value "
                f"was moved from another row or edited",
                run_id=run_id,
                key=key,
            ) from None
        return plain.decode("utf-8", "surrogatepass")

    def seal_row(
        self, run_id: str, key: str, result: str | None, error: str | None, tb: str | None
    ) -> tuple[str | None, str | None, str | None]:
        """A step row's result, error and traceback, encrypted."""
        return (
            self.seal(result, run_id, key, "result"),
            self.seal(error, run_id, key, "error"),
            self.seal(tb, run_id, key, "traceback"),
        )


def key_refusal(
    where: str, stored: str | None, cipher: Cipher | None, *, doing: str = "this journal"
) -> EncryptionKeyError | None:
    """Why ``cipher`` cannot write to (or read) a goal whose stored check value is ``stored``
    (None: the goal holds no encrypted value, as far as the file knows; ``""``: it holds some
    but no check value was recorded, a file from before migration 0017); None when it can.
    ``where`` names the goal (and the file), ``doing`` what holds the key."""
    if stored is None:
        return None
    if cipher is None:
        return EncryptionKeyError(
            f"{where}: its values are encrypted and {doing} has no key: expected the key they "
            f"were written with, as encryption_key= or {ENCRYPTION_KEY_ENV} (without it, new "
            f"values would be stored in plaintext beside them)"
        )
    if stored and cipher.check != stored:  # "": encrypted values, no check recorded
        return EncryptionKeyError(
            f"{where}: its values are encrypted with another key than the one {doing} has: "
            f"expected the key they were written with (encryption_key= or "
            f"{ENCRYPTION_KEY_ENV}); to change the key, re-encrypt the file first "
            f"with 'lil rekey' (docs/audit.md)"
        )
    return None


def make_cipher(value: Any, where: str = "encryption_key=") -> Cipher | None:
    """A cipher for ``value`` (text as UTF-8, or bytes); None for no key. EncryptionKeyError
    for a key under 16 bytes, or without the ``cryptography`` package."""
    if value is None:
        return None
    secret = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
    if len(secret) < MIN_KEY_BYTES:
        raise EncryptionKeyError(
            f"{where}: expected an encryption key of at least {MIN_KEY_BYTES} bytes, found "
            f"{len(secret)}; use a long random secret (python -c 'import secrets; "
            f"print(secrets.token_hex(32))') and keep it outside the journal file"
        )
    return Cipher(secret)


def env_cipher() -> Cipher | None:
    """The cipher of ``LETITLOOP_ENCRYPTION_KEY``, or None when it is unset or empty."""
    text = os.environ.get(ENCRYPTION_KEY_ENV)
    return make_cipher(text, ENCRYPTION_KEY_ENV) if text else None
