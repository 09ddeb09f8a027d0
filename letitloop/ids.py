"""Who and what a row names: run ids (ULIDs, which sort by time) and this machine's host name.

The journal, markers, maintenance (``fork``) and the supervisor all take them from here.
"""

from __future__ import annotations

import secrets
import socket

#: The host name recorded beside a process id (a run's holder, a marker's
#: holder, a supervisor event): a pid means something only on its host.
HOST = socket.gethostname()

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_run_id(t: float) -> str:
    """A ULID: 48-bit milliseconds then 80 random bits, Crockford base32; sorts by time."""
    n = (int(t * 1000) << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(n >> shift) & 31] for shift in range(125, -1, -5))
