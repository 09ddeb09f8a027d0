"""The sealed chain: what a seal covers, how one entry links to the previous, the key.

With a seal key, each row of a run that reaches a final state (a step done or
failed, a marker done or failed, a sleep or a wait done) adds an entry to the
run's chain (the ``seals`` table, migrations/0013_seals.sql): its position
``n``, the row's key, kind and status, :func:`row_digest` of the row's content,
and :func:`link`, an HMAC-SHA256 under the key of all that and the previous
entry's seal. An edited row no longer matches its entry's digest; an edited,
deleted, reordered or inserted entry breaks the links after it; only the key's
holder can make a link. What it proves and does not: docs/audit.md.

This module is pure: it computes, it reads and writes nothing. Writing the
entries is the store's (``sqlite_seals.py``); checking a run's chain,
``inspection/verify.py``.
"""

from __future__ import annotations

import os

from ..errors import SealKeyError

__all__ = [
    "FINAL",
    "SEAL_KEY_ENV",
    "env_seal_key",
    "link",
    "row_digest",
    "seal_key",
]

#: The environment variable that holds the seal key (text, used as its UTF-8 bytes).
SEAL_KEY_ENV = "LETITLOOP_SEAL_KEY"

#: The statuses a row is sealed in: its final ones. A step ``running`` or
#: ``retrying``, a marker ``pending``, a sleep ``sleeping``, a wait ``waiting``
#: change again, and replay never hands them back.
FINAL = ("done", "failed")

#: Keys shorter than this are refused: an HMAC key is as strong as it is long.
MIN_KEY_BYTES = 16

#: The first entry's "previous seal": nothing came before it.
GENESIS = ""


def seal_key(value: str | bytes | None, where: str = "seal=") -> bytes | None:
    """The key as bytes (text is taken as UTF-8); None for no key. Raises SealKeyError
    for a key shorter than 16 bytes."""
    if value is None:
        return None
    key = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
    if len(key) < MIN_KEY_BYTES:
        raise SealKeyError(
            f"{where}: expected a seal key of at least {MIN_KEY_BYTES} bytes, found "
            f"{len(key)}; use a long random secret (python -c 'import secrets; "
            f"print(secrets.token_hex(32))') and keep it outside the journal file"
        )
    return key


def env_seal_key() -> bytes | None:
    """The key in ``LETITLOOP_SEAL_KEY``, or None when it is unset or empty."""
    text = os.environ.get(SEAL_KEY_ENV)
    return seal_key(text, SEAL_KEY_ENV) if text else None


def _text(value: object) -> bytes:
    # None is written as a lone NUL, which no text column of ours holds; every other
    # value as its text (lone surrogates kept as is), so a NULL and "None" differ.
    if value is None:
        return b"\x00"
    return str(value).encode("utf-8", "surrogatepass")


def _fields(tag: bytes, values: tuple[object, ...]) -> bytes:
    """``tag`` then each value's bytes, each prefixed by its length (8 bytes, big-endian)."""
    parts = [tag]
    for value in values:
        data = _text(value)
        parts.append(len(data).to_bytes(8, "big"))
        parts.append(data)
    return b"".join(parts)


def row_digest(
    run_id: str,
    key: str,
    kind: str,
    status: str,
    fn: str | None,
    fp: str | None,
    result: str | None,
    error: str | None,
    wake_at: str | None,
) -> str:
    """Hex SHA-256 of what a row's replay depends on, as every reader sees it.

    ``run_id`` is the run's id (not its number in the file), ``fn`` the
    function's name (not its id in ``functions``). Each field is prefixed
    by its length, so no two different rows give the same bytes.
    """
    import hashlib  # here: OpenSSL's bindings cost an import ~3 ms, a run without a seal nothing

    return hashlib.sha256(
        _fields(b"letitloop-row-v1", (run_id, key, kind, status, fn, fp, result, error, wake_at))
    ).hexdigest()


def link(
    secret: bytes, run_id: str, n: int, key: str, kind: str, status: str, digest: str, prev: str
) -> str:
    """Hex HMAC-SHA256 of entry ``n`` of run ``run_id``'s chain, after the seal ``prev``
    (:data:`GENESIS` for the first)."""
    import hmac

    message = _fields(b"letitloop-seal-v1", (run_id, str(n), key, kind, status, digest, prev))
    return hmac.digest(secret, message, "sha256").hex()
