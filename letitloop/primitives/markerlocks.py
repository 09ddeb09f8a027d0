"""The process-local tier of a marker's lock: one lock per marker for this process's threads.

A registry of :class:`_LocalLock` by marker key, each kept while anyone uses
it, forgotten by a forked child. The second tier, the marker's lock file
for other processes, is ``locks.py``; ``markerhold.py`` takes both.
"""

from __future__ import annotations

import os
import threading


class _LocalLock:
    """The process-local lock of one marker, alive while anyone uses it."""

    __slots__ = ("holder", "lock", "owner", "users")

    def __init__(self) -> None:
        # A plain Lock (not RLock): an async holder acquires it in a worker
        # thread and releases it from the event loop's thread.
        self.lock = threading.Lock()
        self.users = 0
        self.owner: object = None
        self.holder = ""


_local: dict[str, _LocalLock] = {}
_local_guard = threading.Lock()


def _forget_after_fork() -> None:
    # A forked child has none of its parent's threads: the holders recorded
    # here are gone (their lock files stay with the parent's descriptors).
    global _local_guard
    _local.clear()
    _local_guard = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def local_enter(key: str) -> _LocalLock:
    with _local_guard:
        entry = _local.get(key)
        if entry is None:
            entry = _local[key] = _LocalLock()
        entry.users += 1
        return entry


def local_leave(key: str) -> None:
    with _local_guard:
        entry = _local[key]
        entry.users -= 1
        if entry.users == 0:
            # Per-item markers (f"charge:{order_id}") must not grow this forever.
            del _local[key]


def local_disown(key: str) -> _LocalLock:
    """Clear the owner of ``key``'s lock (its holder is letting go); the entry, to release."""
    with _local_guard:
        entry = _local[key]
        entry.owner = None
        entry.holder = ""
    return entry


def local_holder(key: str) -> str:
    """How the thread or task of this process holding ``key``'s lock is named; "" if none."""
    with _local_guard:
        entry = _local.get(key)
        return entry.holder if entry is not None and entry.owner is not None else ""
