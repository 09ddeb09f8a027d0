"""TEMPORARY (identity2 groundwork): stands in for the core's API of branch identity."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from letitloop.adapters.agentcalls import digest, open_journal
from letitloop.journal import Journal

SECOND_COPY_TIMEOUT = 600.0


def request_run(label: str, request: Any) -> str:
    return f"{label}-{digest(request)}"


def adapter_reuse(reuse: Any, fresh: bool) -> Any:
    return reuse


@contextlib.contextmanager
def run_journal2(
    goal: str,
    path: str | None,
    *,
    run: str | None = None,
    reuse: Any = None,
    fresh: bool = False,
    timeout: float = SECOND_COPY_TIMEOUT,
) -> Iterator[Journal]:
    journal = open_journal()
    if journal is not None:
        yield journal
        return
    with Journal(goal, path=path, run=run, timeout=timeout) as journal:
        yield journal
