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

import threading
import weakref

from letitloop.durable import current
from letitloop.errors import NoJournalError
from letitloop.journal import Journal
from letitloop.steps import parent_step

#: Calls counted so far, per journal object: {(parent key, label): last number}.
_counts: weakref.WeakKeyDictionary[Journal, dict[tuple[str, str], int]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


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
