"""``lil ui``'s server: uvicorn serving :func:`letitloop.web.app.create_app` on one socket."""

from __future__ import annotations

import errno
import secrets
import socket
import sys
import threading
import webbrowser
from pathlib import Path

import uvicorn

from ..inspection import open_inspector
from .app import LOOPBACK_NAMES, create_app


class ListenError(Exception):
    """The address could not be listened on; the text is lil's one line (what, and what to do)."""


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """Why ``host:port`` cannot be listened on, and the option that gets past it."""
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        other = port + 1 if port < 65535 else 8765
        return (
            f"port {port} is taken on {host} (another program listens there, perhaps another "
            f"lil ui); pick another with --port, e.g. lil ui --port {other}, "
            f"or --port 0 for any free port"
        )
    if exc.errno == errno.EACCES:
        return (
            f"cannot listen on {where}: permission denied (ports below 1024 need privileges); "
            f"pick another with --port, e.g. lil ui --port 8765, or --port 0 for any free port"
        )
    if exc.errno == errno.EADDRNOTAVAIL or isinstance(exc, socket.gaierror):
        return (
            f"cannot listen on {where}: {host} is not an address of this machine "
            f"({exc.strerror or exc}); pass --host 127.0.0.1, or one of this machine's addresses"
        )
    return f"cannot listen on {where}: {exc.strerror or exc}; pick another --host or --port"


def host_names(host: str) -> list[str] | None:
    """The Host header values ``lil ui`` bound to ``host`` answers: the address itself, and
    the loopback names for a loopback address; None: not a loopback address (the network
    can reach it, and only ``--allow-remote`` with its token serves it)."""
    import ipaddress

    bare = host.strip("[]")
    if bare == "localhost":
        return list(LOOPBACK_NAMES)
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return None  # a name: what it resolves to is the network's to say
    if not address.is_loopback:
        return None
    shown = f"[{bare}]" if address.version == 6 else bare
    return list(dict.fromkeys([shown, bare, *LOOPBACK_NAMES]))


def serve(
    path: str | Path | None,
    host: str,
    port: int,
    *,
    open_browser: bool = False,
    allow_remote: bool = False,
) -> None:
    """Serve the journal at ``path`` until interrupted (Ctrl-C, SIGTERM).

    The journal is checked first (a missing file is one error, before anything listens);
    an address that cannot be listened on (a port taken, a privileged port, another
    machine's address) raises ListenError, whose text says which and what to pass instead.
    ``port`` 0 takes a free port; the first line printed is the address, with the real
    port (``lil ui: http://127.0.0.1:8765/ …``), which scripts and tests read.
    """
    names = host_names(host)
    if names is None and not allow_remote:
        raise ListenError(
            f"lil ui --host {host}: expected a loopback address (127.0.0.1, ::1, localhost); "
            f"found one the network can reach, which would show your runs to anyone there. "
            f"Pass --allow-remote to serve it anyway, to browsers that open the address with "
            f"the token lil ui prints"
        )
    token = secrets.token_urlsafe(24) if names is None else None
    journal = open_inspector(path)
    where = journal.path
    journal.close()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ListenError(cannot_listen(host, port, exc)) from None
    # Listening before the address is printed: a browser (or a test) that connects at
    # once waits in the backlog until uvicorn accepts, rather than being refused.
    sock.listen(2048)
    port = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{port}/" + (f"?token={token}" if token else "")
    # A loopback bind answers its own names only (a page elsewhere that rebinds a name
    # of its own to 127.0.0.x is refused); a remote one any name, with the token.
    app = create_app(where, allowed_hosts=names or ["*"], token=token)
    # Access logs off: a run id in every line says nothing the page does not.
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    print(f"lil ui: {url} serving {where} read-only; Ctrl-C stops", flush=True)
    if open_browser:
        threading.Timer(0.5, webbrowser.open, (url,)).start()
    server.run(sockets=[sock])
    sys.stdout.flush()
