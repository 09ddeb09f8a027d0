"""What an agent kill script (tests/*_team.py) writes outside the journal: its side file.

Each execution of a model or tool call writes ``start WHAT`` then ``end WHAT``
lines (one ``open``/``write`` each: a SIGKILL never tears a line), and the
process SIGKILLs itself at ``start`` of its kill point. The tests count these
lines, never the journal's own rows. ``together`` makes two concurrent calls
meet before either finishes, so a kill inside one always finds the other in
flight, never between its ``end`` line and its commit.
"""

from __future__ import annotations

import asyncio
import os
import signal


class SideFile:
    """One script's side file, kill point and pair barrier, its own (tests share processes)."""

    def __init__(self, **more: str) -> None:
        #: The side file, and where to kill this process ("" for nowhere); set by the
        #: script's main(), or by a test that runs a mode in its own process.
        self.where: dict[str, str] = {"side": "", "kill_at": "", **more}
        self.arrived: list[asyncio.Event] = []

    def event(self, what: str) -> None:
        """``start WHAT`` in the side file, and a SIGKILL if this is the kill point."""
        with open(self.where["side"], "a") as f:
            f.write(f"start {what}\n")
        if what == self.where["kill_at"]:
            os.kill(os.getpid(), signal.SIGKILL)

    def done(self, what: str) -> None:
        with open(self.where["side"], "a") as f:
            f.write(f"end {what}\n")

    async def together(self) -> None:
        """Wait here until the other of two concurrent calls has arrived too."""
        mine = asyncio.Event()
        self.arrived.append(mine)
        if len(self.arrived) % 2 == 0:
            for arrived in self.arrived[-2:]:
                arrived.set()
        await asyncio.wait_for(mine.wait(), 30)
