"""Which journal an OpenAI Agents call goes to, and the keys of its steps.

The SDK's ``Runner`` runs an agent's turns one after another (a handoff
passes the turn to the next agent), and a turn's tool calls concurrently. So:

- ``{label}.model:{n}``: the n-th model call of ``label`` (the agent's name,
  or ``model`` for models made by :class:`DurableModelProvider`) in the
  journal's current step, counted in call order;
- ``tool:{name}:{call_id}``: a function tool's call, by the call id the
  (journaled) model response gave it: never by the order the concurrent
  calls start or finish in;
- ``session:{id}.{op}:{n}``: a journaled session's reads and writes.

Counts are kept per journal object (one per attempt) and per parent step, so
a resumed attempt counts again from 1 and a step replayed as a unit (with
its children) leaves the counts of the steps after it unchanged.
"""

from __future__ import annotations

import weakref

from letitloop.errors import NoJournalError
from letitloop.primitives import forksafe
from letitloop.run.durable import current
from letitloop.run.journal import Journal
from letitloop.run.steps import parent_step

#: The tool call ids a person approved (``run_durably``), per journal object: each runs
#: once (letitloop/adapters/approved.py), and ``stop_after`` for its wait if cut short.
approved: weakref.WeakKeyDictionary[Journal, dict[str, float | None]] = weakref.WeakKeyDictionary()


class StoppedToWait(Exception):
    """Carries ``RunWaiting`` out of the SDK's tool tasks as an ordinary exception.

    A ``SystemExit`` raised in one of the asyncio tasks the ``Runner`` makes
    leaves the event loop at once; ``run_durably`` raises ``run_waiting`` in
    the caller's task instead.
    """

    def __init__(self, run_waiting: BaseException) -> None:
        super().__init__(str(run_waiting))
        self.run_waiting = run_waiting


#: Calls counted so far: {(parent key, label): last number}.
_counts: weakref.WeakKeyDictionary[Journal, dict[tuple[str, str], int]] = (
    weakref.WeakKeyDictionary()
)
_lock = forksafe.lock()


def journal_for(what: str) -> Journal:
    """The journal open in this context; NoJournalError naming ``what`` when none is."""
    try:
        return current(what)
    except NoJournalError:
        raise NoJournalError(
            f"{what} ran with no journal open; run the agent inside 'with Journal(goal):' "
            f"(or 'async with', or a @durable_async function): Runner.run(...) there"
        ) from None


def next_number(journal: Journal, label: str) -> int:
    """The number of the next call of ``label`` under the step running now (from 1)."""
    parent = parent_step.get()
    under = parent[1] if parent is not None and parent[0] is journal else ""
    with _lock:
        counts = _counts.setdefault(journal, {})
        n = counts.get((under, label), 0) + 1
        counts[(under, label)] = n
    return n
