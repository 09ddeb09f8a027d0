"""Idle queue workers woken by PostgreSQL's LISTEN/NOTIFY instead of their next poll.

An entry added or queued again on a PostgreSQL journal sends ``NOTIFY`` on the
journal's channel (``channel``: one per schema, as a schema is one journal)
with the queue's name, in the transaction that adds it: the server delivers
it at the commit, to every session that listens. :class:`Listener` is that
session, one per process: a thread on a connection of its own that ``LISTEN``s
and moves ``queue_records.WAKEUPS`` for each notification, which wakes that
queue's idle workers in the process at once. A worker starts one
(``PostgresQueue.listener``) and stops it when its last thread ends.

Polling stays: a worker waits for a wake-up at most ``POLL_SECONDS`` and then
looks anyway, so a notification lost (the listener's connection broken and
made again, a notification sent before it listened, a server behind a pooler
in transaction mode that does not forward them) costs what polling cost, and
a dead holder's entry (no notification: the server only drops its lock) is
taken over at the next look as before.
"""

from __future__ import annotations

import hashlib
import sys
import threading

from ...queueing.queue_records import WAKEUPS
from .database import connect

#: Seconds before a listener whose connection failed connects again (meanwhile, polling).
RECONNECT_SECONDS = 1.0
#: Longest wait for a notification before the listener checks whether it was stopped.
WAIT_SECONDS = 0.25


def channel(schema: str) -> str:
    """The NOTIFY channel of the journal in ``schema``: an identifier of its own (a schema's
    name may be any text; a channel is an identifier of at most 63 bytes)."""
    return "letitloop_queue_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


class Listener:
    """A listening session on one journal's channel, in a daemon thread, until :meth:`stop`
    (a worker starts one and stops it with its last thread: ``queue_worker.py``)."""

    def __init__(self, location: str, channel: str) -> None:
        self.location = location
        self.channel = channel
        #: Set while the session listens (a notification sent before that is not delivered).
        self.listening = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="letitloop-queue-listen", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """End the session: its thread ends within WAIT_SECONDS."""
        self._stopped.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stopped.is_set():
            conn = None
            try:
                conn = connect(self.location)
                conn.execute(f'LISTEN "{self.channel}"')
                self.listening.set()
                while not self._stopped.is_set():
                    for note in conn.notifies(timeout=WAIT_SECONDS):
                        WAKEUPS.wake(note.payload)
            except Exception as exc:  # the server away: polling meanwhile, then again
                self.listening.clear()
                if not self._stopped.is_set():
                    print(f"letitloop worker: queue wake-ups: {exc}", file=sys.stderr, flush=True)
                    self._stopped.wait(RECONNECT_SECONDS)
            finally:
                if conn is not None:
                    conn.close()
