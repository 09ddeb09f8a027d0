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

import os
import threading
import weakref
from typing import Any

__all__ = ["condition", "lock", "rlock"]

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


def _free_after_fork() -> None:
    for made in list(_made):
        made._at_fork_reinit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_free_after_fork)
