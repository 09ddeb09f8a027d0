"""The ``Idempotency-Key`` header of a request that starts a run: the rule a key keeps.

A client's key names a run, so it is checked before anything is queued: 1 to
``MAX_KEY_LENGTH`` printable ASCII characters. One that breaks the rule is
``IdempotencyKeyError``, which Starlette and FastAPI answer 400 with its message.
"""

from __future__ import annotations

from ..errors import QueueError

try:
    from starlette.exceptions import HTTPException
except ImportError as exc:  # the extra is missing: say what to install
    raise ImportError(
        "letitloop.integrations needs Starlette (FastAPI installs it): "
        "pip install -e '.[web]' (in your clone)"
    ) from exc

#: The request header whose value names a run: the same value, the same run.
IDEMPOTENCY_HEADER = "Idempotency-Key"

#: The longest Idempotency-Key accepted, in characters: Stripe's limit, room for any UUID,
#: hash or "order-<id>" a client makes (a run's name may be longer: 512).
MAX_KEY_LENGTH = 255


class IdempotencyKeyError(QueueError, HTTPException):
    """A request's ``Idempotency-Key`` header breaks the rule (``check_key``): answered 400
    with this message (Starlette's ``HTTPException``; FastAPI answers ``{"detail": ...}``)
    before anything is queued."""

    def __init__(self, message: str) -> None:
        QueueError.__init__(self, message)  # its args: it pickles as a LetItLoopError does
        self.status_code = 400
        self.detail = message
        self.headers = None

    def __str__(self) -> str:
        return str(self.detail)


def check_key(header: str) -> str:
    """The run name an ``Idempotency-Key`` header's value gives; ``IdempotencyKeyError`` if it
    breaks the rule: 1 to ``MAX_KEY_LENGTH`` printable ASCII characters (space to ``~``),
    not blank, no space at either end. A quoted value (the IETF draft's structured-field
    string, ``"abc"``, with ``\\"`` and ``\\\\`` escapes) stands for the text inside it."""
    key = header
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = _unquote(header)
    what = f"{IDEMPOTENCY_HEADER} header"
    fix = f"send 1 to {MAX_KEY_LENGTH} printable ASCII characters, such as a UUID"
    if not key.strip():
        raise IdempotencyKeyError(f"{what}: expected a key, got a blank value {header!r}; {fix}")
    bad = next((c for c in key if not " " <= c <= "~"), None)
    if bad is not None:
        raise IdempotencyKeyError(
            f"{what}: expected printable ASCII, got {_said(bad)} at character "
            f"{key.index(bad) + 1} of {header[:60]!r}; {fix}"
        )
    if len(key) > MAX_KEY_LENGTH:
        raise IdempotencyKeyError(
            f"{what}: expected at most {MAX_KEY_LENGTH} characters, got {len(key)} "
            f"({header[:40]!r}…); {fix}"
        )
    if key != key.strip():
        raise IdempotencyKeyError(f"{what}: expected no space at either end, got {header!r}; {fix}")
    return key


def _unquote(header: str) -> str:
    """A structured-field string's text (RFC 8941 3.3.3): ``\\"`` and ``\\\\`` are escapes."""
    out: list[str] = []
    chars = iter(header[1:-1])
    for c in chars:
        if c == '"':
            raise IdempotencyKeyError(
                f'{IDEMPOTENCY_HEADER} header: expected a quoted string with \\" for a quote '
                f"inside it, got {header[:60]!r}; send the key unquoted, or quote it whole"
            )
        if c == "\\":
            c = next(chars, "")
            if c not in ('"', "\\"):
                raise IdempotencyKeyError(
                    f'{IDEMPOTENCY_HEADER} header: expected \\" or \\\\ after a backslash in '
                    f"a quoted key, got {header[:60]!r}; send the key unquoted"
                )
        out.append(c)
    return "".join(out)


def _said(char: str) -> str:
    """A refused character, as a reader can tell it: a header's bytes past ASCII are decoded
    as Latin-1, so showing the character would show what the client did not send."""
    return f"the byte 0x{ord(char):02X}" if ord(char) < 256 else f"U+{ord(char):04X}"
