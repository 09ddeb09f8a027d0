"""What the agent adapters (smolagents, AutoGen) share: the journal a call goes to, a
request's run and a call's identity as plain data, and per-run call counters.

An agent adapter makes each model call and each tool call a step of the
journal. Which journal: the one the adapter opened around the agent's run
(``Journal(session_id)``), or, when the user already has one open (``with
Journal(...)`` or ``@durable``), that one, so several agents of one script
share a run. A call's identity is its arguments as plain JSON data (a value
that is not JSON is identified by its type's name), so a replay is checked
against the call made now without the framework's objects having to be
encodable.

Which run: the one the user names (``run=``), else the request itself
(:func:`request_run`: the task or messages, and the conversation it
continues), handed back for ``DEFAULT_REUSE`` seconds once completed, and
waited for while another process runs it (docs/adapters.md, "The same
request is never paid twice").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from letitloop.canon import NoFingerprint
from letitloop.durable import current
from letitloop.errors import NoJournalError
from letitloop.fingerprint import Fingerprinter
from letitloop.journal import Journal

#: What one model call cost, in your currency, from the model's name (None where the
#: framework gives none) and the call's input and output tokens: letitloop keeps no
#: prices, and the frameworks' usage objects carry tokens only.
Pricing = Callable[[str | None, int, int], float]


def open_journal() -> Journal | None:
    """The journal the free functions would use now (``letitloop.step``), or None."""
    try:
        return current("an agent adapter")
    except NoJournalError:
        return None


#: How long an adapter hands back a completed request's recorded answer when no run is
#: named (seconds): it covers a restart after a kill and a retried request; the same
#: question asked tomorrow gets a fresh answer, not yesterday's. ``reuse=`` sets another.
DEFAULT_REUSE = 3600.0

#: How long an adapter's opener waits for another process running the same request:
#: as long as that process lives (its death releases the run at once), so a second copy
#: of a request in flight waits for the first and replays its answer whole.
DEFAULT_TIMEOUT = math.inf


def request_run(label: str, request: Any, conversation: str | None = None) -> str:
    """The run a request is when no run is named: ``{label}.request:{digest}``.

    ``request`` is the request's plain data (the task, the messages, the
    inputs); ``conversation`` the conversation it continues (``conversation_after``
    of the turn before; None: a new conversation). The same request in the
    same conversation is the same run; a new prompt is a new run.
    """
    return f"{label}.request:{digest({'request': request, 'after': conversation})}"


def conversation_after(conversation: str | None, run: str, answer: Any) -> str:
    """The conversation a turn leaves: the one it continued, its run and its answer."""
    return digest([conversation, run, answer])


@contextlib.contextmanager
def run_journal(
    goal: str,
    path: str | None,
    *,
    run: str | None = None,
    reuse: float | timedelta | None = None,
    fresh: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> Iterator[Journal]:
    """The journal for one run of an agent: the open one if any, else ``Journal(goal, run=...)``.

    A journal this opens is closed when the block ends: completed when it ends
    normally, failed with the exception otherwise (the next run resumes it).
    ``run``, ``reuse``, ``fresh`` and ``timeout`` are ``Journal``'s (an
    adapter passes its request's run and ``DEFAULT_REUSE`` where the user named
    none); an open journal is the user's, and its run is theirs.
    """
    journal = open_journal()
    if journal is not None:
        yield journal
        return
    with Journal(goal, run=run, path=path, reuse=reuse, fresh=fresh, timeout=timeout) as journal:
        yield journal


#: Fingerprints of the values JSON cannot hold, as the journal's steps take them.
_FINGERPRINTS = Fingerprinter()


def _not_json(value: object) -> str:
    """A value JSON cannot hold: its type, and its fingerprint where it has one."""
    name = f"{type(value).__module__}.{type(value).__qualname__}"
    try:
        return f"<{name} {_FINGERPRINTS.digest(value)}>"
    except NoFingerprint:
        return f"<{name}>"


def plain(value: Any) -> Any:
    """``value`` as plain JSON data: dicts, lists, text, numbers; other values as text.

    A value JSON cannot hold becomes its type's name and its fingerprint as
    a step argument's (a set, a datetime, a dataclass, a numpy array, a class
    with ``letitloop.register_fingerprint``); one with no fingerprint (an
    image, a file handle) is its type's name alone, so two such arguments of
    one type are the same call to the journal's argument check.
    """
    return json.loads(json.dumps(value, default=_not_json, sort_keys=True))


def digest(value: Any) -> str:
    """A short, stable name for ``value``'s plain form (12 hex digits of its SHA-256)."""
    text = json.dumps(plain(value), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def plain_text(value: Any) -> Any:
    """A ``str`` subclass (smolagents' AgentText) as ``str``; anything else as it is."""
    if isinstance(value, str) and type(value) is not str:
        return str(value)
    return value


class Counters:
    """How many calls each agent made in each run of this process, counted from 1.

    An agent's calls come one after another, so the count names a call by
    its place, never by timing; a resumed run replays the same calls in the
    same order and counts them again from 1.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}

    def next(self, run_id: str, label: str) -> int:
        with self._lock:
            n = self._counts.get((run_id, label), 0) + 1
            self._counts[(run_id, label)] = n
            return n
