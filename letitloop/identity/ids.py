"""Who and what a row names: run ids (ULIDs, which sort by time) and this machine's host name.

The journal, markers, maintenance (``fork``) and the supervisor all take them from here.
"""

from __future__ import annotations

import os

#: The host name recorded beside a process id (a run's holder, a marker's
#: holder, a supervisor event): a pid means something only on its host. Read
#: from ``uname`` (what ``socket.gethostname()`` returns on POSIX) without
#: loading the socket module on every ``import letitloop``.
HOST = os.uname().nodename if hasattr(os, "uname") else os.environ.get("COMPUTERNAME", "")

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_run_id(t: float) -> str:
    """A ULID: 48-bit milliseconds then 80 random bits, Crockford base32; sorts by time.

    Ids made in the same millisecond sort in no particular order (their
    random parts differ from the first characters on, so short prefixes stay
    unique); where creation order matters within a millisecond, the ``runs``
    table's rowid says it.
    """
    n = (int(t * 1000) << 80) | int.from_bytes(os.urandom(10), "big")  # 80 random bits
    return "".join(_CROCKFORD[(n >> shift) & 31] for shift in range(125, -1, -5))
