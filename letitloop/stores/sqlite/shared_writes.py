"""A write transaction on the process's shared connection to a journal file, the store given
back at its end: what each call of a work queue's store (``queue.py``) is."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from .pool import close_store

if TYPE_CHECKING:
    import sqlite3

    from .store import Store


class SharedWrite:
    """``Store.write()`` on a shared connection, given back at the end (unless ``keep``)."""

    def __init__(self, store: Store, keep: bool = False) -> None:
        self.store = store
        self.keep = keep
        self._cm: contextlib.AbstractContextManager[sqlite3.Connection] | None = None

    def __enter__(self) -> sqlite3.Connection:
        self._cm = self.store.write()
        try:
            return self._cm.__enter__()
        except BaseException:
            if not self.keep:
                close_store(self.store)
            raise

    def __exit__(self, *exc: object) -> None:
        assert self._cm is not None
        try:
            self._cm.__exit__(*exc)  # type: ignore[arg-type]
        finally:
            if not self.keep:
                close_store(self.store)
