"""One budget over several runs: ``SharedSpend``, what a request's runs spent and reserved together.

A request an adapter journals in several runs (LangGraph's: a run per execution
of a durable node, budgets.py bounds each) is bounded as a whole when every
run's journal is opened with the same :class:`SharedSpend`
(``Journal(..., budget=shared)``): each reservation is checked against what
all the runs spent, plus what all of them reserved and did not settle, in
this process and in the processes before it that died.

- **Who the runs are**: ``members()``, the caller's, lists the runs already
  recorded for the request (in the file: a process that died made some). The
  first run opened loads what each of them spent and reserved and never
  settled (``Storage.run_spend``, ``Storage.run_reservations``), once; every
  run opened after adds its own, once. The caller records a run as a member
  before its journal opens (LangGraph's: in the run's recorded input).
- **One at a time**: runs of one request share one SharedSpend object in a
  process (the caller's job); two processes never work on one request at
  once (LangGraph's invocation holds its thread). Everything is under
  ``lock``, as in ``Spend``.
- Each step's counts are kept under ``<run id>/<key>``, and each run's
  reservations are numbered above every member's last: the numbers stay
  unique in each run's ``reservations`` rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .budgets import Budget, Spend

if TYPE_CHECKING:
    from .runs import BudgetedRun

#: Separates a run's id from a step key in a shared Spend's keys.
RUN_SEP = "/"


class SharedSpend(Spend):
    """A :class:`Spend` counted over several runs (see the module docstring).

    ``members()`` lists the ids of the runs already recorded as the request's;
    ``scope`` says what the budget bounds (``request 3 of thread 't1'``), and
    ``advice`` what to do when it is reached, in its error.
    """

    def __init__(
        self, budget: Budget, members: Callable[[], Iterable[str]], scope: str, advice: str
    ) -> None:
        super().__init__(budget)
        self.members = members
        self.scope_text = scope
        self.advice = advice
        #: The runs whose spend is counted (loaded from the file, or opened here).
        self.joined: set[str] = set()
        self.loaded = False

    def key_of(self, j: BudgetedRun, key: str) -> str:
        return f"{j.run_id}{RUN_SEP}{key}"

    def step_of(self, key: str) -> str:
        return key.partition(RUN_SEP)[2] or key

    def scope(self, j: BudgetedRun) -> str:
        return self.scope_text

    def row(self) -> tuple[str, dict[str, Any]]:
        """The budget row names what the budget bounds (``shared``, which ``lil show``
        prints), and its key a hash of it: a run opened for another request (another
        scope) records a row of its own."""
        label, row = super().row()
        tag = hashlib.blake2b(self.scope_text.encode("utf-8", "surrogatepass"), digest_size=6)
        return f"{label},shared={tag.hexdigest()}", {**row, "shared": self.scope_text}

    def opened(
        self,
        j: BudgetedRun,
        rows: Iterable[tuple[str, int | None, int | None, float | None]],
        reservations: tuple[int, list[tuple[str, int, int | None, float | None]]],
    ) -> None:
        """Count ``j``'s run (``rows``, ``reservations``: as ``Spend.load``'s) with the
        others, once; on the first run opened, load the members' spend first."""
        storage = j._opened.storage
        with self.lock:
            if not self.loaded and storage is not None:
                self.loaded = True
                for run in self.members():
                    if run == j.run_id or run in self.joined:
                        continue
                    self.joined.add(run)
                    self._count(run, storage.run_spend(run), storage.run_reservations(run))
            if j.run_id in self.joined:
                return
            self.joined.add(j.run_id)
            self._count(j.run_id, rows, reservations)

    def _count(
        self,
        run: str,
        rows: Iterable[tuple[str, int | None, int | None, float | None]],
        reservations: tuple[int, list[tuple[str, int, int | None, float | None]]],
    ) -> None:
        """Under ``lock``: add one run's recorded spend and its reservations never settled."""
        for key, inp, outp, cost in rows:
            mine = self.by_key.setdefault(f"{run}{RUN_SEP}{key}", [None, None, None])
            mine[0] = inp if mine[0] is None else mine[0] + (inp or 0)
            mine[1] = outp if mine[1] is None else mine[1] + (outp or 0)
            mine[2] = cost if mine[2] is None else mine[2] + (cost or 0.0)
            self.tokens += (inp or 0) + (outp or 0)
            self.cost += cost or 0.0
        last, held = reservations
        # Numbered above every member's last reservation: unique in each run.
        self.calls = max(self.calls, last)
        for key, call, tokens, cost in held:
            self.left.append((f"{run}{RUN_SEP}{key}", call, tokens, cost))
            self.reserved_tokens += tokens or 0
            self.reserved_cost += cost or 0.0
        self.reached = self._reached()
