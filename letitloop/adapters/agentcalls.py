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
import shlex
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from typing import Any

from letitloop.errors import NoJournalError, StepMismatchError
from letitloop.identity.canon import NoFingerprint
from letitloop.identity.fingerprint import Fingerprinter
from letitloop.run.durable import current
from letitloop.run.journal import Journal

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


def request_options(
    label: str,
    request: Any,
    conversation: str | None,
    *,
    run: str | None,
    turn: int,
    reuse: float | timedelta | None,
    fresh: bool,
) -> dict[str, Any]:
    """``run=``, ``reuse=`` and ``fresh=`` of the journal of one request of an agent.

    The user's ``run`` names the conversation's first turn (``run``) and its
    later ones (``{run}.turn{n}``), with the user's ``reuse`` (None: forever,
    as ``Journal``'s); with none, the run is the request in its conversation
    (:func:`request_run`), handed back for ``DEFAULT_REUSE`` unless the user
    set ``reuse`` or ``fresh``.
    """
    if run is not None:
        name = run if turn <= 1 else f"{run}.turn{turn}"
        return {"run": name, "reuse": reuse, "fresh": fresh}
    window = DEFAULT_REUSE if reuse is None and not fresh else reuse
    return {"run": request_run(label, request, conversation), "reuse": window, "fresh": fresh}


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


@contextlib.asynccontextmanager
async def run_journal_async(
    goal: str,
    path: str | None,
    *,
    run: str | None = None,
    reuse: float | timedelta | None = None,
    fresh: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> AsyncIterator[Journal]:
    """:func:`run_journal` for an agent run on an event loop: a held run is waited for in a
    worker thread (``async with Journal``), so the loop keeps running meanwhile."""
    journal = open_journal()
    if journal is not None:
        yield journal
        return
    async with Journal(
        goal, run=run, path=path, reuse=reuse, fresh=fresh, timeout=timeout
    ) as journal:
        yield journal


#: The details a StepMismatchError carries, kept by :func:`agent_mismatch`.
MISMATCH_DETAILS = (
    "run_id",
    "key",
    "recorded",
    "called",
    "differences",
    "recorded_fp",
    "called_fp",
    "arguments",
)


def agent_mismatch(
    error: StepMismatchError, agent: str, name: str, identity: Any
) -> StepMismatchError:
    """``error`` (a call that differs from the one recorded at its place) as an agent
    adapter's user reads it: the agent, the call (the model call and its prompt's end, or
    the tool and its arguments: ``identity``, the call's plain data), what differs, and
    the three ways out."""
    journal = open_journal()
    run = getattr(journal, "generation", None) or error.run_id
    goal = journal.goal if journal is not None else "GOAL"
    reset = f"lil reset {shlex.quote(goal)} --run {error.run_id}"
    fork = f"lil fork {error.run_id} --from-step {shlex.quote(error.key or '')}"
    model = isinstance(identity, dict) and "messages" in identity
    if error.recorded != error.called:
        differs = f"recorded by {error.recorded}, now made by {error.called}"
    elif model:
        differs = "its prompt, tools or options differ from the recorded call's"
    else:
        differs = "its arguments differ from the recorded call's"
    return StepMismatchError(
        f"agent {agent!r}: its {describe_call(name, identity)} is not the call recorded at "
        f"this place of run {run!r}: {differs}. The agent's request, its conversation or "
        f"its code changed under a recorded run; nothing was called. Ways out: give the "
        f"request a new run (run='...', or fresh=True for a new answer), reset the run "
        f"({reset}), or fork it before this call ({fork})",
        **{k: getattr(error, k, None) for k in MISMATCH_DETAILS},
    )


def mismatch_within(error: BaseException) -> StepMismatchError | None:
    """The StepMismatchError a framework wrapped ``error`` around (smolagents'
    AgentGenerationError, a tool's error), if any: the agent's run raises it itself."""
    seen: BaseException | None = error
    for _ in range(8):  # a chain of causes, never a cycle
        if seen is None or isinstance(seen, StepMismatchError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def describe_call(name: str, identity: Any) -> str:
    """A call for an error: the model call and its prompt's end, or the tool and its
    arguments (``identity``: the call's plain data, as its step records it)."""
    if isinstance(identity, dict) and "messages" in identity:
        last = identity["messages"][-1] if identity["messages"] else None
        prompt = last.get("content") if isinstance(last, dict) else last
        return f"model call {name!r} (prompt ending {excerpt(prompt)!r})"
    return f"call {name!r} with {excerpt(identity)}"


def excerpt(value: Any, limit: int = 120) -> str:
    """``value``'s plain form as short text: its end, cut at ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(plain(value), sort_keys=True)
    return text if len(text) <= limit else "…" + text[-limit:]


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
