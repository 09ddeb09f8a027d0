"""The items of a ``kickoff_for_each`` with a run name: each recorded with its inputs.

With ``run=`` (the kickoff's or the handler's), ``kickoff_for_each`` names its
n-th input's run ``{run}.item{n}``: by position, as CrewAI kicks the copies
off. A list of inputs that changed under a recorded batch would then pair
item n with another input, and replay that input's answer. So each item's
run records the inputs it was kicked off with, as its first step
(``crewai.item``, :func:`item_inputs`), and an item whose run recorded other
inputs is refused before any call (:func:`check_item`): a
``StepMismatchError`` naming the item, its recorded and its new inputs, and
the ways out. Nothing recorded is lost: the same list run again resumes or
replays the batch. A batch without a run name needs none of this: each
item's run is named by its own inputs (``handler.py``).
"""

from __future__ import annotations

import shlex
from typing import Any

from ...errors import StepMismatchError
from ...identity.step_names import named
from ...identity.unchecked import unchecked
from ...run.journal import Journal
from ..agentcalls import excerpt, plain

#: The key of an item's first step, which records its inputs.
ITEM_KEY = "crewai.item"


@named("letitloop:crewai.item")
def item_inputs(inputs: Any) -> Any:
    """An item's step: the inputs it was kicked off with (plain data), as its result."""
    return inputs


def check_item(journal: Journal, n: int, batch: str, inputs: dict[str, Any] | None) -> None:
    """Record item ``n``'s ``inputs`` in its run (``journal``), or, once recorded, check them.

    Raises StepMismatchError, nothing called, when its run recorded other inputs
    (the list of inputs of batch ``batch`` changed under it).
    """
    now = plain(dict(inputs or {}))
    # unchecked: the step replays whatever it recorded, compared here, not refused blind.
    recorded = journal.step(ITEM_KEY, item_inputs, unchecked(now))
    if recorded == now:
        return
    differ = []
    if isinstance(recorded, dict) and isinstance(now, dict):
        differ = sorted(k for k in {*recorded, *now} if recorded.get(k) != now.get(k))
    which = f" ({', '.join(map(repr, differ))} differ)" if differ else ""
    goal = shlex.quote(journal.goal)
    raise StepMismatchError(
        f"kickoff_for_each item {n} of run {batch!r} (its run {journal.generation!r}, "
        f"{journal.run_id}, of goal {journal.goal!r}): recorded for inputs "
        f"{excerpt(recorded)}, now kicked off with {excerpt(now)}{which}. A run name numbers "
        f"a batch's items by their place in the list, so the list changed under a recorded "
        f"batch and this item would be handed another input's answer; nothing was called. "
        f"Ways out: the list as it was (it resumes), a new run name for this list "
        f"(run='...'), fresh=True to ask every item again, forget this item (lil reset "
        f"{goal} --run {journal.run_id}), or fork it (lil fork {journal.run_id} "
        f"--from-step {ITEM_KEY})",
        run_id=journal.run_id,
        key=ITEM_KEY,
        differences=", ".join(differ) or "the inputs",
    )
