"""``JournalSession``: an OpenAI Agents session whose reads and writes are journal steps.

The SDK's ``Runner`` reads a session's history when a run starts, adds the
run's input to it, and adds each turn's new items as the turn ends. With a
plain session, a run killed after its input was saved and run again adds the
input a second time (the SDK's ``SQLiteSession``: 5 items where an
uninterrupted run has 4). Here each read (``session:{id}.get:{n}``) and each
change (``add``, ``pop``, ``clear``) is a step of the open journal: a resumed
run reads the history its first attempt read, and a change that returned is
not made again. A change cut short by the kill (its items written to the
underlying session, its step not yet recorded) is noticed by the count of
items the journal expects there, and not made twice.

Outside a journal, the session is the underlying one, unjournaled.
"""

from __future__ import annotations

import weakref
from typing import Any

from agents.items import TResponseInputItem
from agents.memory.session import Session, SessionABC

from letitloop.adapters.agentcalls import digest, plain
from letitloop.adapters.agentcalls import open_journal as journal_open
from letitloop.adapters.openai_agents.calls import next_number
from letitloop.identity.step_names import named
from letitloop.identity.unchecked import unchecked
from letitloop.run.journal import Journal


@named("letitloop:openai_agents.session.get")
async def read_items(limit: int | None, session: tuple[Session]) -> dict[str, Any]:
    """The step's function of a read: the items (the last ``limit``) and how many there are."""
    (underlying,) = session
    items = await underlying.get_items()
    shown = items if limit is None else (items[-limit:] if limit > 0 else [])
    return {"items": plain(shown), "count": len(items)}


@named("letitloop:openai_agents.session.add")
async def add_items(identity: str, call: tuple[Session, list[Any], int | None]) -> int:
    """The step's function of an add: the items written, unless a killed try wrote them."""
    del identity
    underlying, items, expected = call
    if expected is not None:
        have = await underlying.get_items()
        size = len(items)
        if len(have) == expected + size and plain(have[expected:]) == plain(items):
            return size  # the attempt that died wrote them before its step was recorded
    await underlying.add_items(items)
    return len(items)


@named("letitloop:openai_agents.session.pop")
async def pop_item(expected: int | None, session: tuple[Session]) -> Any:
    """The step's function of a pop: the item removed (None when a killed try removed it)."""
    (underlying,) = session
    if expected is not None and len(await underlying.get_items()) == expected - 1:
        return None
    return plain(await underlying.pop_item())


@named("letitloop:openai_agents.session.clear")
async def clear(expected: int | None, session: tuple[Session]) -> None:
    del expected
    (underlying,) = session
    await underlying.clear_session()


class JournalSession(SessionABC):
    """``session`` (any SDK session: ``SQLiteSession``, …) read and changed through steps.

    Pass it as ``Runner.run(..., session=JournalSession(SQLiteSession(id, path)))``.
    Its ``session_id`` and ``session_settings`` are the underlying session's.
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self.session_id = session.session_id
        self.session_settings = session.session_settings
        #: How many items the underlying session holds, as each journal's steps tell it.
        self._counts: weakref.WeakKeyDictionary[Journal, int] = weakref.WeakKeyDictionary()

    def _key(self, journal: Journal, op: str) -> str:
        label = f"session:{self.session_id}.{op}"
        return f"{label}:{next_number(journal, label)}"

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        journal = journal_open()
        if journal is None:
            return await self.session.get_items(limit)
        got = await journal.async_step(
            self._key(journal, "get"), read_items, limit, unchecked((self.session,))
        )
        self._counts[journal] = got["count"]
        items: list[TResponseInputItem] = got["items"]
        return items

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        journal = journal_open()
        if journal is None:
            await self.session.add_items(items)
            return
        expected = self._counts.get(journal)
        added = await journal.async_step(
            self._key(journal, "add"),
            add_items,
            digest(items),
            unchecked((self.session, items, expected)),
        )
        if expected is not None:
            self._counts[journal] = expected + added

    async def pop_item(self) -> TResponseInputItem | None:
        journal = journal_open()
        if journal is None:
            return await self.session.pop_item()
        expected = self._counts.get(journal)
        item: TResponseInputItem | None = await journal.async_step(
            self._key(journal, "pop"), pop_item, expected, unchecked((self.session,))
        )
        if expected is not None:
            self._counts[journal] = max(expected - 1, 0)
        return item

    async def clear_session(self) -> None:
        journal = journal_open()
        if journal is None:
            await self.session.clear_session()
            return
        expected = self._counts.get(journal)
        await journal.async_step(
            self._key(journal, "clear"), clear, expected, unchecked((self.session,))
        )
        self._counts[journal] = 0
