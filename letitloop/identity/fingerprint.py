"""Fingerprints of a step's arguments and of a run's input: what makes two calls the same call.

A step's fingerprint is one short digest per argument, in a readable text
column: ``"3f9a1c22b0d4 9e01aa7c55f2 user_id=77aa01021b3c"`` (positional
arguments in order, then keyword arguments by name). A replay hands back a
recorded result only to a call with the same fingerprint, and a mismatch can
name the argument that differs.

**Two values are one argument exactly when the codec would store the same
value for them**, type for type at every depth, dict entries and set items
in any order: ``1``, ``1.0`` and ``True`` are three values, a list is not
a tuple, a set not a frozenset, a dataclass not the dict of its fields,
``0.0`` not ``-0.0``, every nan one value, an aware datetime keeps its zone.
Each argument is turned into canonical bytes (``canon.py``: msgspec's
MessagePack encoder, dict keys sorted), hashed by BLAKE2b. Plain JSON
values (exact ``dict`` with ``str`` keys, ``list``, ``str``, ``int``
within 64 bits, finite ``float``, ``bool``, ``None``) and ``bytes`` are
their own canonical form, so they go to msgspec at once (the fast path,
checked by the codec's plain scan); everything else is tagged with a
MessagePack extension type no plain value produces: ints beyond 64 bits,
strs with lone surrogates, nan and infinities, tuples, sets and frozensets
(items sorted by their bytes), dicts with other keys (entries sorted by
their bytes), the codec's built-in types (datetimes, Decimals, UUIDs,
paths, … as the codec writes them), registered classes (by their codec
name and payload), and unregistered dataclasses, NamedTuples, enums,
``msgspec.Struct``s, Pydantic models and exceptions (by ``module.QualName``
and the fields the codec would store).

Values the codec cannot encode have a fingerprint only when it is known how
to tell them apart: a fingerprint function registered for their class
(``letitloop.register_fingerprint``, ``fingerprint_hooks.py``), a numpy
array or scalar (dtype, shape and bytes; numpy is never imported here), a
function or class defined at module
level (its qualified name), a ``functools.partial`` or bound method (their
parts), a subclass of a built-in type (its type name, its built-in value and
its instance attributes). Anything else has none: a step call or an unnamed
run's input holding it raises :class:`FingerprintError`, never "the same
call" as another value of its type.

``unchecked(x)`` is left out of the comparison at any depth (inside lists,
dicts, tuples, sets, and the fields of dataclasses, NamedTuples,
``msgspec.Struct``s and Pydantic models), and the function receives ``x``
(``unchecked.py``). An argument that is ``unchecked(x)`` digests to ``~``; one
holding an ``unchecked()`` part digests to ``~`` and the digest of the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..codec import MAX_DEPTH, default_registry
from ..codec.plain import plain_tree
from ..errors import FingerprintError
from .canon import NoFingerprint, canonical, pack
from .unchecked import Unchecked

try:  # the builtin module: hashlib would load OpenSSL's bindings (~3 ms) for nothing
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b

if TYPE_CHECKING:
    from ..codec import CodecRegistry

#: Digest bytes per argument: 48 bits, 12 hex characters. Two different
#: values of one argument collide with probability 2**-48 (about 4e-15).
DIGEST_BYTES = 6

#: An empty hash of DIGEST_BYTES: ``_ARG_HASH.copy()`` is ``blake2b(digest_size=6)``
#: without parsing the keyword, about 0.12 µs less per argument (:func:`arg_digest`).
_ARG_HASH = blake2b(digest_size=DIGEST_BYTES)


def arg_digest(data: bytes) -> str:
    """``blake2b(data, digest_size=DIGEST_BYTES).hexdigest()``: one argument's digest, as hex.

    The same digest by a copy of an empty hash (tests/test_fingerprint.py holds
    the two to one answer).
    """
    h = _ARG_HASH.copy()
    h.update(data)
    return h.hexdigest()


#: The digests of the str and int arguments seen last (ids, URLs, a model's name), by
#: value: a call that passes one again (its replay, a loop's fixed argument) looks its
#: digest up (about 100 instructions) instead of hashing it (about 3,000). Only exact
#: ``str`` and ``int`` values are keys or looked up, and no two of them are equal unless
#: they are one argument (``True``, ``1.0`` never get here). Emptied when full.
_KNOWN: dict[str | int, str] = {}

#: Entries of ``_KNOWN`` at most (a few hundred KB at the longest kept strs).
KNOWN_MAX = 2048

#: Longer strs are hashed each time: their digest is not kept.
KNOWN_CHARS = 128


def remember(value: str | int, digest: str) -> str:
    """``digest``, kept in ``_KNOWN`` as the digest of ``value`` (an exact str or int)."""
    if type(value) is int or len(value) <= KNOWN_CHARS:  # type: ignore[arg-type]
        if len(_KNOWN) >= KNOWN_MAX:
            _KNOWN.clear()
        _KNOWN[value] = digest
    return digest


#: What an argument wrapped in ``unchecked()`` contributes to the fingerprint;
#: also the first character of the digest of an argument holding an unchecked part.
UNCHECKED = "~"


def _type_name(t: type) -> str:
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


class Fingerprinter:
    """Computes fingerprints with one registry (a journal has one)."""

    __slots__ = ("_reg",)

    def __init__(self, registry: CodecRegistry | None = None) -> None:
        self._reg = registry if registry is not None else default_registry

    def digest(self, value: Any) -> str:
        """The digest of one argument (``~`` for an unchecked one, ``~…`` for one holding one).

        Raises NoFingerprint for a part with no fingerprint (:meth:`call` words it).
        """
        t = type(value)
        if t is str or t is int:  # the usual argument: an id, a URL (canonical()'s first case)
            known = _KNOWN.get(value)
            if known is not None:
                return known
            try:
                h = _ARG_HASH.copy()  # arg_digest(), inline on the usual argument's path
                h.update(pack(value))
                return remember(value, h.hexdigest())
            except (OverflowError, UnicodeEncodeError):
                pass  # beyond 64 bits, a lone surrogate: tagged by canonical()
        elif t is dict or t is list:
            if plain_tree(value, MAX_DEPTH):  # canonical()'s second case, inline: a payload
                try:
                    return arg_digest(pack(value))
                except (OverflowError, UnicodeEncodeError):
                    pass
        elif t is Unchecked:
            return UNCHECKED
        data, tildes = canonical(value, self._reg, True)
        hexed = arg_digest(data)
        return UNCHECKED + hexed if tildes else hexed

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """A step call's fingerprint: one digest per argument (``""`` for no arguments).

        Raises FingerprintError for an argument holding a value with no
        fingerprint, or an ``unchecked()`` that cannot be taken off.
        """
        digest = self.digest
        try:
            if not kwargs:
                if not args:
                    return ""
                # An id, a URL: digest()'s first case inline, without a call per argument.
                parts = []
                for a in args:
                    t = type(a)
                    if t is str or t is int:
                        known = _KNOWN.get(a)
                        if known is not None:
                            parts.append(known)
                            continue
                        try:
                            h = _ARG_HASH.copy()
                            h.update(pack(a))
                            known = h.hexdigest()
                        except (OverflowError, UnicodeEncodeError):
                            pass  # beyond 64 bits, a lone surrogate: digest() tags it
                        else:
                            # remember(), inline: a miss costs a dict insert, not a call.
                            if t is int or len(a) <= KNOWN_CHARS:
                                if len(_KNOWN) >= KNOWN_MAX:
                                    _KNOWN.clear()
                                _KNOWN[a] = known
                            parts.append(known)
                            continue
                    parts.append(digest(a))
                return parts[0] if len(parts) == 1 else " ".join(parts)
            parts = [digest(a) for a in args]
            parts += [f"{k}={digest(kwargs[k])}" for k in sorted(kwargs)]
            return " ".join(parts)
        except NoFingerprint:
            raise self._refusal(args, kwargs) from None

    def _refusal(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> FingerprintError:
        """The FingerprintError of a call, naming its first argument with no fingerprint."""
        named: list[tuple[str, Any]] = [(f"argument {i}", a) for i, a in enumerate(args)]
        named += [(f"keyword argument {k!r}", kwargs[k]) for k in sorted(kwargs)]
        for where, value in named:
            try:
                self.digest(value)
            except NoFingerprint as exc:
                path = exc.path()
                inside = "" if path == "$" else f" at {path}"
                advice = exc.advice or (
                    f"a result recorded for one such value could replay for another; register "
                    f"how to tell them apart (letitloop.register_fingerprint("
                    f"{exc.type.__qualname__}, fn), fn returning what identifies one), or pass "
                    f"it as letitloop.unchecked(value) to leave it out of the call's identity"
                )
                return FingerprintError(
                    f"the step's {where} holds{inside} a {_type_name(exc.type)}: {exc.reason}; "
                    f"the call is refused before it runs: {advice}",
                    path=path,
                    type_name=_type_name(exc.type),
                )
        return FingerprintError(  # a registered fingerprint function that answered differently
            "an argument of the step has no fingerprint (a fingerprint function registered "
            "for one of its types raised once, then not); pass it as letitloop.unchecked(value)"
        )

    def whole(self, value: Any, *, strict: bool = True) -> str:
        """One digest of a whole value (a run's input), 128 bits as 32 hex characters.

        ``strict``: a part with no fingerprint raises FingerprintError (the
        input of an unnamed run, which the input picks); otherwise it counts
        by its type (a named run's input, recorded for reading only).
        """
        try:
            data, _ = canonical(value, self._reg, strict)
        except NoFingerprint as exc:
            path = exc.path()
            inside = "" if path == "$" else f" at {path}"
            advice = exc.advice or (
                f"register how to tell such values apart "
                f"(letitloop.register_fingerprint({exc.type.__qualname__}, fn)), name the run "
                f"(run=...), or pass the value as letitloop.unchecked(value) to leave it out "
                f"of the run's identity"
            )
            raise FingerprintError(
                f"the run's input holds{inside} a {_type_name(exc.type)}: {exc.reason}; it "
                f"cannot choose which run this call resumes (another call's run could be "
                f"taken for it): {advice}. For @durable, the input is the call's arguments by "
                f"name ($.order is the argument 'order')",
                path=path,
                type_name=_type_name(exc.type),
            ) from None
        return blake2b(data, digest_size=16).hexdigest()


def differences(recorded: str, called: str) -> str:
    """Which arguments differ between two fingerprints, in words (for StepMismatchError)."""

    def split(fp: str) -> tuple[list[str], dict[str, str]]:
        positional: list[str] = []
        named: dict[str, str] = {}
        for part in fp.split():
            name, eq, digest = part.rpartition("=")
            if eq:
                named[name] = digest
            else:
                positional.append(digest)
        return positional, named

    rec_pos, rec_kw = split(recorded)
    now_pos, now_kw = split(called)
    said: list[str] = []
    if len(rec_pos) != len(now_pos):
        said.append(
            f"{len(now_pos)} positional argument{'s' * (len(now_pos) != 1)} now, "
            f"{len(rec_pos)} recorded"
        )
    said += [
        f"positional argument {i} differs"
        for i, (a, b) in enumerate(zip(rec_pos, now_pos, strict=False))
        if not same_digest(a, b)
    ]
    for name in sorted(set(rec_kw) | set(now_kw)):
        if name not in now_kw:
            said.append(f"keyword argument {name!r} was recorded but is not passed now")
        elif name not in rec_kw:
            said.append(f"keyword argument {name!r} is passed now but was not recorded")
        elif not same_digest(rec_kw[name], now_kw[name]):
            said.append(f"keyword argument {name!r} differs")
    return "; ".join(said) or "the arguments differ"


def same_digest(recorded: str, called: str) -> bool:
    """Whether one argument's recorded digest matches a call's.

    Equal digests match; ``~`` (an unchecked argument) matches anything; a
    digest of a value holding an unchecked part (``~…``) matches a digest of a
    value without one (the part was wrapped after the call was recorded, or
    unwrapped since), but not another ``~…``: the rest of it differs.
    """
    if recorded in (called, UNCHECKED) or called == UNCHECKED:
        return True
    return recorded[:1] == UNCHECKED != called[:1] or called[:1] == UNCHECKED != recorded[:1]
