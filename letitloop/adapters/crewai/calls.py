"""Which journal a wrapped model or tool call goes to, and its step: named, numbered, one at a time.

A crew's kickoff (``handler.py``) makes a :class:`Session` current for the
calls made under it (a context variable: CrewAI copies the context into the
threads of asynchronous tasks and of parallel tool calls). Each model call
and each tool call then becomes one step of that session's journal:

- its name is what it calls and a digest of the call's identity (the
  messages, the tool's arguments): ``llm:Researcher:1f0c3a9e``,
  ``tool:search:5b7d20c4``, prefixed with the session's name when the crew
  shares a journal the program opened (``research_crew:llm:…``). Concurrent
  calls (the parallel tool calls of one answer, asynchronous tasks) thus
  have names of their own, and which one starts first never matters; the
  journal numbers identical calls (``tool:search:5b7d20c4#2``), which are
  interchangeable, and keys a call made inside another step under it;
- its fingerprint is that identity too, so a replay hands back the result
  recorded for the same call and never another's;
- identical calls run one at a time in a session (a lock per name and
  parent step): the journal refuses two calls of one name in flight at
  once. Different calls still run concurrently.

Outside a kickoff of a wrapped crew, a wrapped call runs as it would
unwrapped: nothing is journaled.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from ...identity.unchecked import unchecked
from ...primitives import forksafe
from ...run.journal import Journal
from ...run.steps import parent_step

T = TypeVar("T")


@dataclass(frozen=True)
class Session:
    """The journal a crew's calls go to, and the prefix of their step names."""

    journal: Journal
    prefix: str = ""


#: The session of the kickoff running in this context (None: not journaled).
active: ContextVar[Session | None] = ContextVar("letitloop_crewai_session", default=None)

#: One lock per (parent step, name) of each open journal: calls of one name
#: take turns. Weak on the journal, so a closed one's locks go with it. Plain
#: locks, not ``forksafe``'s: each is held across the call (the user's code, which
#: may fork), and a forked child never uses its parent's journal.
_locks: weakref.WeakKeyDictionary[Journal, dict[tuple[str, str], threading.Lock]] = (
    weakref.WeakKeyDictionary()
)
_locks_guard = forksafe.lock()


def _lock_for(journal: Journal, name: str) -> threading.Lock:
    parent = parent_step.get()
    where = parent[1] if parent is not None and parent[0] is journal else ""
    with _locks_guard:
        table = _locks.setdefault(journal, {})
        lock = table.get((where, name))
        if lock is None:
            lock = table[(where, name)] = threading.Lock()
        return lock


def step_name(text: str) -> str:
    """``text`` made fit for a step name: no ``/`` (it joins parent and child keys), no ``#``."""
    cleaned = " ".join(text.replace("/", "|").replace("#", "No.").split())
    return cleaned[:200] or "?"


def digest(identity: Any) -> str:
    """Eight hex digits of ``identity`` (JSON values), the same in every process."""
    text = json.dumps(identity, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def journaled(session: Session, name: str, fn: Callable[..., T], call: Any, identity: Any) -> T:
    """``fn(call, identity)`` as the session's step ``name:<digest>``: recorded once, then replayed.

    ``identity`` (JSON values) is what tells this call from another (its
    digest is in the step's name; the journal fingerprints it too); ``call``
    is everything else ``fn`` needs (the live objects), left out of both.
    Raises what the journal raises and what ``fn`` raises (recorded as a
    failed step, run again on the next attempt).
    """
    full = f"{session.prefix}{name}:{digest(identity)}"
    with _lock_for(session.journal, full):
        return session.journal.step(full, fn, unchecked(call), identity)
