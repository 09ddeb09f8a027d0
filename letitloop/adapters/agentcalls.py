"""What the agent adapters (smolagents, AutoGen) share: the journal a call goes to, a
call's identity as plain data, and per-run call counters.

An agent adapter makes each model call and each tool call a step of the
journal. Which journal: the one the adapter opened around the agent's run
(``Journal(session_id)``), or, when the user already has one open (``with
Journal(...)`` or ``@durable``), that one, so several agents of one script
share a run. A call's identity is its arguments as plain JSON data (a value
that is not JSON is identified by its type's name), so a replay is checked
against the call made now without the framework's objects having to be
encodable.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Callable, Iterator
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


@contextlib.contextmanager
def run_journal(goal: str, path: str | None) -> Iterator[Journal]:
    """The journal for one run of an agent: the open one if any, else ``Journal(goal)``.

    A journal this opens is closed when the block ends: completed when it ends
    normally, failed with the exception otherwise (the next run resumes it).
    """
    journal = open_journal()
    if journal is not None:
        yield journal
        return
    with Journal(goal, path=path) as journal:
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
