"""Fingerprints of a step's arguments and of a run's input: what makes two calls the same call.

A step's fingerprint is one short digest per argument, in a readable text
column: ``"3f9a1c22b0d4 9e01aa7c55f2 user_id=77aa01021b3c"`` (positional
arguments in order, then keyword arguments by name). A replay hands back a
recorded result only to a call with the same fingerprint, and a mismatch can
name the argument that differs.

Each argument is encoded with msgspec's MessagePack encoder in deterministic
order (dict keys and set items sorted), so equal values give equal bytes in
every process, whatever the hash seed. Values msgspec does not know are
encoded by the codec registry when their type is registered, and otherwise
by their type's name: two different sockets, clients or sessions count as
the same argument (they cannot be compared across processes anyway). Wrap an
argument that legitimately changes between attempts (a timestamp made outside
any step) in :func:`unchecked`: it is passed to the function unchanged and
left out of the comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import msgspec

try:  # the builtin module: hashlib would load OpenSSL's bindings (~3 ms) for nothing
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b

if TYPE_CHECKING:
    from .codec import CodecRegistry

T = TypeVar("T")

#: Digest bytes per argument: 48 bits, 12 hex characters. Two different
#: values of one argument collide with probability 2**-48 (about 4e-15).
DIGEST_BYTES = 6

#: What an argument wrapped in ``unchecked()`` contributes to the fingerprint.
UNCHECKED = "~"


class Unchecked(Generic[T]):
    """An argument left out of the step's fingerprint; see :func:`unchecked`."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"unchecked({self.value!r})"


def unchecked(value: T) -> T:
    """Pass ``value`` to a step's function, but leave it out of the call's identity.

    ``step("ask", llm, unchecked(f"today is {date.today()}"), question)``: the
    first argument may differ on a later attempt and the recorded result still
    replays; ``question`` must still match. Typed as returning ``T`` so that
    type checkers accept it in place of the value.
    """
    return Unchecked(value)  # type: ignore[return-value]


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _hook_for(registry: CodecRegistry | None) -> Callable[[Any], Any]:
    def hook(value: Any) -> Any:
        t = type(value)
        if registry is not None:
            entry = registry._entry_for_type(t)
            if entry is not None:
                return [entry.name, entry.encode(value)]
        dump = getattr(value, "model_dump", None)  # a Pydantic model, not registered
        if dump is not None and callable(dump):
            try:
                return [_type_name(t), dump(mode="json")]
            except Exception:
                pass
        if callable(value):
            module = getattr(value, "__module__", None) or t.__module__
            qualname = getattr(value, "__qualname__", None) or t.__qualname__
            return f"<callable {module}.{qualname}>"
        return f"<{_type_name(t)}>"

    return hook


class Fingerprinter:
    """Computes fingerprints with one registry (a journal has one)."""

    __slots__ = ("_encode",)

    def __init__(self, registry: CodecRegistry | None = None) -> None:
        if registry is None:
            from .codec import default_registry

            registry = default_registry
        self._encode = msgspec.msgpack.Encoder(
            enc_hook=_hook_for(registry), order="deterministic"
        ).encode

    def digest(self, value: Any) -> str:
        """The digest of one argument (``~`` for an unchecked one)."""
        if type(value) is Unchecked:
            return UNCHECKED
        try:
            data = self._encode(value)
        except Exception:
            # Not encodable as it is: a set of mixed types (no sort order), an
            # int beyond 64 bits, a string with lone surrogates, a cycle.
            data = _fallback(value).encode("utf-8", "backslashreplace")
        return blake2b(data, digest_size=DIGEST_BYTES).hexdigest()

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """A step call's fingerprint: one digest per argument (``""`` for no arguments)."""
        digest = self.digest
        if not kwargs:
            if not args:
                return ""
            if len(args) == 1:
                return digest(args[0])
            return " ".join(map(digest, args))
        parts = [digest(a) for a in args]
        parts += [f"{k}={digest(kwargs[k])}" for k in sorted(kwargs)]
        return " ".join(parts)

    def whole(self, value: Any) -> str:
        """One digest of a whole value (a run's input), 128 bits as 32 hex characters."""
        try:
            data = self._encode(value)
        except Exception:
            data = _fallback(value).encode("utf-8", "backslashreplace")
        return blake2b(data, digest_size=16).hexdigest()


def _fallback(value: Any) -> str:
    t = type(value)
    if t is int:
        return f"int:{value:x}"  # hex: exact, and free of the int-to-decimal digit limit
    if t is str:
        return f"str:{value!r}"  # repr is exact and the same in every process
    if t in (tuple, list):
        return f"{t.__name__}:[" + ",".join(map(_fallback, value)) + "]"
    return f"<{_type_name(t)}>"


def unwrap(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with every ``unchecked(x)`` replaced by ``x``."""
    if any(type(a) is Unchecked for a in args):
        args = tuple(a.value if type(a) is Unchecked else a for a in args)
    if kwargs and any(type(v) is Unchecked for v in kwargs.values()):
        kwargs = {k: v.value if type(v) is Unchecked else v for k, v in kwargs.items()}
    return args, kwargs


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
        if a != b and UNCHECKED not in (a, b)
    ]
    for name in sorted(set(rec_kw) | set(now_kw)):
        if name not in now_kw:
            said.append(f"keyword argument {name!r} was recorded but is not passed now")
        elif name not in rec_kw:
            said.append(f"keyword argument {name!r} is passed now but was not recorded")
        elif rec_kw[name] != now_kw[name] and UNCHECKED not in (rec_kw[name], now_kw[name]):
            said.append(f"keyword argument {name!r} differs")
    return "; ".join(said) or "the arguments differ"
