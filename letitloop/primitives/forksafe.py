"""Locks that a forked child can take: each one is free again in the child, at the fork.

Only the forking thread goes on in a child. A lock that another thread of the parent
held at that moment stays held in the child for good, and the child's first call that
takes it waits forever: a worker thread claiming an entry while the program forks
(a web server's workers, ``multiprocessing``, ``os.fork``) left the child's first
``enqueue`` hung. The process-wide objects a child goes on using (a queue's store, the
queues declared, the cache of source hashes, the in-memory store, an adapter's tables)
take their locks from here, and each is made free in the child (``_at_fork_reinit``,
as the standard library's ``logging`` and ``concurrent.futures`` do).

What such a lock guards is left as the other thread left it: these locks guard a
table's single update or a connection made again in a child (its process id is
checked), never a change that a child could see half made.

Not for a lock that the forking thread itself may hold across the fork (the child
would release it twice): the stores' own fork guards hold theirs on purpose and free
them in their own hooks (``stores/sqlite/locks.py``, ``stores/sqlite/connections.py``).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import weakref
from typing import Any

__all__ = ["condition", "free_cached_property_locks", "lock", "rlock"]

#: Every lock made here that is still in use: what a forked child frees.
_made: weakref.WeakSet[Any] = weakref.WeakSet()


def lock() -> threading.Lock:
    """A ``threading.Lock`` that is free in a forked child."""
    made = threading.Lock()
    _made.add(made)
    return made


def rlock() -> threading.RLock:
    """A ``threading.RLock`` that is free in a forked child."""
    made = threading.RLock()
    _made.add(made)
    return made


def condition(on: threading.Lock | threading.RLock | None = None) -> threading.Condition:
    """A ``threading.Condition`` on ``on`` (else on its own lock) that is free in a forked
    child, with no waiters."""
    made = threading.Condition(threading.Lock() if on is None else on)
    _made.add(made)
    return made


#: The modules (names and their prefixes) whose classes' ``cached_property`` locks a forked
#: child frees (:func:`free_cached_property_locks`), those locks as last found, and how
#: many modules were loaded then.
_owners: set[str] = set()
_cached_properties: list[Any] = []
_modules_seen = -1


def free_cached_property_locks(*modules: str) -> None:
    """Free in a forked child the locks of the ``functools.cached_property`` attributes of
    the classes of ``modules`` (module names; a name covers the modules under it).

    Up to Python 3.11, a ``cached_property`` computes its value under one lock that all the
    instances of its class share (3.12 dropped it). A child forked while another thread
    computed one (LangGraph's ``PregelNode.node`` on a new graph's first run, say) had that
    lock held for good, and hung at its own first computation of that attribute. The
    properties are found before a fork when modules were loaded since the last one (a few
    milliseconds, once), and each one's lock is replaced in the child (microseconds).
    """
    global _modules_seen
    if sys.version_info >= (3, 12):
        return
    _owners.update(modules)
    _modules_seen = -1


def _find_cached_properties() -> None:
    global _modules_seen
    if not _owners or len(sys.modules) == _modules_seen:
        return
    under = tuple(f"{owner}." for owner in _owners)
    found: list[Any] = []
    for name, module in list(sys.modules.items()):
        if module is None or not (name in _owners or name.startswith(under)):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                found.extend(
                    attribute
                    for attribute in list(vars(value).values())
                    if isinstance(attribute, functools.cached_property)
                    and hasattr(attribute, "lock")
                )
    _cached_properties[:] = found
    _modules_seen = len(sys.modules)


def _free_after_fork() -> None:
    for made in list(_made):
        made._at_fork_reinit()
    for attribute in _cached_properties:
        attribute.lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_find_cached_properties, after_in_child=_free_after_fork)
