"""A failure deep inside a value, the path to it, and the short texts its messages quote.

Encoding and decoding raise :class:`_Fail` where a part does not fit; each
container on the way out adds its path segment, and :func:`encode` or
:func:`decode` turns it into one EncodeError or DecodeError naming ``$.a[3].b``.
The advice for a value that can never be a step result (a function, an open
file, a lock, …) is here too: :func:`_never_stored`.
"""

from __future__ import annotations

import _thread
import functools
import io
import sys
import types
from collections.abc import Iterator
from typing import Any

from .document import MAX_DEPTH


class _Fail(Exception):
    """Internal: a failure deep in a value; containers add their path segment on the way out."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.parts: list[str] = []

    def path(self) -> str:
        return "$" + "".join(reversed(self.parts))


def _key_segment(key: object) -> str:
    if type(key) is str and key.isidentifier():
        return f".{key}"
    return f"[{key!r}]"


def _too_deep() -> _Fail:
    return _Fail(
        f"it nests more than {MAX_DEPTH} levels deep (lists, tuples, sets, dicts and objects' "
        f"fields inside one another), or contains itself; a value nested deeper could not be "
        f"read back from every call stack. Return a flatter value, or one without cycles"
    )


def _type_name(t: type) -> str:
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _need(payload: Any, t: type, what: str) -> Any:
    if type(payload) is not t:
        raise _Fail(
            f"recorded {what} holds a {type(payload).__name__}, expected a {t.__name__}; "
            f"the row was edited or written by another program"
        )
    return payload


def _short_repr(v: Any, width: int = 40) -> str:
    """``repr(v)`` cut to ``width``; never raises (it only serves error messages)."""
    if type(v) is int and v.bit_length() > 128:
        return f"<int of {v.bit_length()} bits>"  # (decimal text may be refused, or slow)
    try:
        r = repr(v)
    except Exception:  # a __repr__ that fails, or a value too deep to print
        return f"<{_type_name(type(v))}>"
    return r if len(r) <= width else r[: width - 3] + "..."


# -- values that can never be a step result ----------------------------------------------------

_CODE = "it is code, not data"
_LIVE = "it exists only in the process that made it"

#: Kinds of values that can never be a step result, checked in this order:
#: (their classes, what such a value is, why it cannot be stored, what to
#: return instead). A class named as text ("socket.socket") counts only if
#: the program imported its module: a value of it cannot exist otherwise,
#: and the module is never imported here.
_NEVER_STORED: tuple[tuple[tuple[type | str, ...], str, str, str], ...] = (
    ((type,), "a class", _CODE, "an instance of it, or its name"),
    (
        (
            types.FunctionType,
            types.BuiltinFunctionType,
            types.MethodType,
            types.MethodWrapperType,
            types.WrapperDescriptorType,
            types.MethodDescriptorType,
            types.ClassMethodDescriptorType,
            functools.partial,
            staticmethod,
            classmethod,
        ),
        "a function",
        _CODE,
        "what it computes (call it inside the step), or a name to look it up by",
    ),
    ((types.ModuleType,), "a module", _CODE, "the data you need from it, or its name"),
    (
        (types.CoroutineType,),
        "a coroutine",
        "it is the call of an async function that was never awaited",
        "its awaited result (an async function is a step through async_step(), which awaits it)",
    ),
    (
        (types.GeneratorType, types.AsyncGeneratorType),
        "a generator",
        "it yields its items lazily and exists only in the process that made it",
        "its items in a list",
    ),
    ((io.IOBase,), "an open file or stream", _LIVE, "its path, or what you read from it"),
    (
        (type({}.keys()), type({}.values()), type({}.items())),
        "a dict view",
        "it is a live view of a dict in the process that made it",
        "its items in a list (list(d.keys()))",
    ),
    (
        (
            _thread.LockType,
            type(_thread.RLock()),
            "threading.Condition",
            "threading.Semaphore",
            "threading.Event",
            "threading.Barrier",
            "asyncio.Lock",
            "asyncio.Condition",
            "asyncio.Semaphore",
            "asyncio.Event",
        ),
        "a lock",
        _LIVE,
        "the data it guards",
    ),
    (
        ("socket.socket",),
        "an open socket",
        _LIVE,
        "the data it received, or the address to connect to again",
    ),
    (("threading.Thread",), "a thread", _LIVE, "what it computed (join it first)"),
    (("subprocess.Popen",), "a running process", _LIVE, "its pid, exit status or output"),
    (
        ("sqlite3.Connection", "sqlite3.Cursor"),
        "a database connection",
        _LIVE,
        "the rows you read from it, or the database's path",
    ),
    (
        ("asyncio.Future", "concurrent.futures.Future"),
        "a future",
        _LIVE,
        "its result (await it, or call .result(), inside the step)",
    ),
)


def _loaded(classes: tuple[type | str, ...]) -> tuple[type, ...]:
    """``classes`` as classes; a "module.Class" name only if the program imported the module."""
    out = []
    for c in classes:
        if isinstance(c, str):
            module, _, name = c.rpartition(".")
            found = getattr(sys.modules.get(module), name, None)
        else:
            found = c
        if isinstance(found, type):
            out.append(found)
    return tuple(out)


def _never_stored_kind(v: Any) -> tuple[str, str, str] | None:
    """(what kind of value ``v`` is, why it cannot be stored, what to return instead), or None."""
    for classes, kind, why, instead in _NEVER_STORED:
        if isinstance(v, _loaded(classes)):
            return kind, why, instead
    if isinstance(v, Iterator) and type(v).__module__ in ("builtins", "itertools"):
        return (
            "an iterator",
            "it is used up as it is read and exists only in the process that made it",
            "its items in a list",
        )
    return None


def _never_stored(v: Any) -> str | None:
    """Why ``v`` can never be a step result and what to return instead; None if it may be data.

    A class, function, module, coroutine, generator, open file, lock,
    socket, thread, process, database connection, future or built-in
    iterator: nothing could rebuild one in the process that replays the
    step, so the message says what to return rather than how to register.
    """
    found = _never_stored_kind(v)
    if found is None:
        return None
    kind, why, instead = found
    if kind == "a class":
        what = f"the class {_type_name(v)}"
    elif kind == "a module":
        what = f"the module {v.__name__}"
    elif kind == "a function":
        named = getattr(v, "func", v)  # a partial: the function it calls
        name = getattr(named, "__qualname__", None)
        name = name if type(name) is str else _type_name(type(v))
        what = "a lambda" if name.endswith("<lambda>") else f"the function {name}"
    else:
        name = _type_name(type(v))
        what = kind if name in kind else f"{kind} ({name})"
    return (
        f"{what} cannot be a step result: {why}, and nothing could rebuild it from the "
        f"journal when the run resumes; return {instead}"
    )
