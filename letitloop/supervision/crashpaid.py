"""The crash test's paid calls: each counted once, from the journal's own usage records.

A step's paid calls are what its function reported with ``letitloop.usage``:
the journal keeps them on the step's row and, for a call its process did not
survive, on a ``crashed`` try (``step_tries``). After a trial, a place (where
a step is called: ``crashhook.Ledger.position``) whose step was committed in
one run, and that recorded usage again under another record in a later run
(another key, or another run of the goal), paid again: a repeat, when the
trial committed more paid steps than the reference run did. A step in
flight at the kill (its body began, its record was not committed) may call
again, as the contract allows: its usage, kept as a crashed try and paid
anew (under its key, or under the key that replaced it at its place), is
reported apart, as allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..inspection.inspectors import open_inspector
from ..stores.schemes import scheme_of

#: ``(input_tokens, output_tokens, cost)`` one record's calls reported; None where none.
Spent = tuple[int | None, int | None, float | None]


@dataclass
class Paid:
    """What the trial's journal says was paid: per ``(run id, key)``, and which crashed."""

    spent: dict[tuple[str, str], Spent]
    crashed: set[tuple[str, str]]


def paid_in(journal: str, run_ids: set[str]) -> Paid:
    """The usage the journal (a file, or a URL) recorded for the runs ``run_ids``: per step
    key, its row's and its tries' (failed and crashed calls), summed, as ``lil show`` reads
    them."""
    spent: dict[tuple[str, str], Spent] = {}
    crashed: set[tuple[str, str]] = set()
    if not run_ids or (scheme_of(journal) is None and not Path(journal).exists()):
        return Paid(spent, crashed)
    inspector = open_inspector(journal)
    try:
        for run_id in sorted(run_ids):
            run = inspector.run(run_id)
            if run is None:  # a run that recorded nothing here
                continue
            usage: list[tuple[str, Spent]] = [
                (row.key, (row.input_tokens, row.output_tokens, row.cost))
                for row in inspector.rows(run)
            ]
            for tried in inspector.tries(run_id):
                usage.append((tried.key, (tried.input_tokens, tried.output_tokens, tried.cost)))
                if tried.ended == "crashed":
                    crashed.add((run_id, tried.key))
            for key, one in usage:
                if one != (None, None, None):
                    spent[(run_id, key)] = added(spent.get((run_id, key)), one)
    finally:
        inspector.close()
    return Paid(spent, crashed)


def added(total: Spent | None, one: Spent) -> Spent:
    """``total`` and ``one`` summed, figure by figure (None where neither has it)."""
    if total is None:
        return one
    return (
        plus(total[0], one[0]),
        plus(total[1], one[1]),
        plus(total[2], one[2]),
    )


def plus(a: Any, b: Any) -> Any:
    """``a + b``, or the one that is not None (None when both are)."""
    return b if a is None else a if b is None else a + b


def amount(spent: Spent) -> str:
    """``spent`` in words: ``120 tokens in, 40 out, cost 0.5``."""
    tokens_in, tokens_out, cost = spent
    words = []
    if tokens_in is not None:
        words.append(f"{tokens_in} tokens in")
    if tokens_out is not None:
        words.append(f"{tokens_out} out")
    if cost is not None:
        words.append(f"cost {cost:g}")
    return ", ".join(words)


def paid_records(events: list[list[tuple[str, str, str, str]]], paid: Paid) -> int:
    """How many committed steps of these runs (``events``: their ledgers) recorded usage:
    the paid calls the program made, each counted once whatever its tries."""
    done = {(run_id, key) for run in events for kind, _, key, run_id in run if kind == "done"}
    return len(done & set(paid.spent))


def judge_paid(
    events: list[list[tuple[str, str, str, str]]], paid: Paid, reference: int
) -> tuple[list[str], list[str]]:
    """The paid calls of one trial's runs (``events``: each run's ledger, the first killed).

    Returns the repeats (a place committed in one run paid again in a later
    one) and the allowed (a step in flight at the kill whose call was paid
    again: its crashed try and its new call), each in words. A place paid
    again counts only when the trial committed more paid steps than the
    reference run did (``reference``): a resumed program may skip finished
    work without calling it (LangGraph skips the nodes its checkpoint holds,
    each node a run of its own), so its next paid steps, of other runs, take
    the places the skipped ones had.
    """
    repeats, allowed = places_paid_again(events, paid)
    committed = paid_records(events, paid)
    if committed <= reference:
        return [], allowed
    if not repeats:
        repeats = [
            f"{committed} paid steps committed, the reference run {reference}: "
            f"{committed - reference} paid again"
        ]
    return repeats, allowed


def places_paid_again(
    events: list[list[tuple[str, str, str, str]]], paid: Paid
) -> tuple[list[str], list[str]]:
    """The places whose step was committed and paid again in a later run, and the steps in
    flight at the kill paid again (allowed), each in words."""
    repeats: list[str] = []
    allowed: list[str] = []
    committed: dict[str, tuple[str, str]] = {}  # where -> (run id, key) committed there
    began: dict[str, tuple[str, str]] = {}  # where -> (run id, key) whose body began first
    told: set[tuple[str, str]] = set()
    for number, run in enumerate(events):
        for kind, where, key, run_id in run:
            record = (run_id, key)
            if kind == "done":
                committed.setdefault(where, record)
            elif kind != "start" or record in told:
                continue
            elif not number:
                began.setdefault(where, record)
            elif where in committed and committed[where] != record and record in paid.spent:
                told.add(record)
                first_run, first_key = committed[where]
                first = paid.spent.get(committed[where])
                repeats.append(
                    f"paid call at {where} paid again: its step was committed as "
                    f"{first_key!r}" + (f" ({amount(first)})" if first else "") + ", then "
                    f"{key!r}"
                    + ("" if first_run == run_id else " of another run")
                    + f" recorded {amount(paid.spent[record])}"
                )
            elif record in paid.crashed and record in paid.spent:
                told.add(record)
                allowed.append(
                    f"step {key!r} in flight at the kill, paid again (allowed): "
                    f"{amount(paid.spent[record])} in all"
                )
            elif (
                where in began
                and began[where] != record
                and began[where] in paid.crashed
                and began[where] in paid.spent
                and record in paid.spent
            ):
                # In flight under one key, called again under another (the key
                # changed): the call may be paid again all the same.
                told.add(record)
                cut = began[where]
                allowed.append(
                    f"step at {where} in flight at the kill as {cut[1]!r} "
                    f"({amount(paid.spent[cut])}), paid again as {key!r} "
                    f"({amount(paid.spent[record])}) (allowed)"
                )
    return repeats, allowed
