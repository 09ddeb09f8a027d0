"""A stdio server's process as its client starts it, the server itself forked elsewhere
(tests/stdio_servers.py): ``python -S -I stdio_launcher.py SOCKET ARGV...``.

It hands its stdin, stdout and stderr (the client's pipes) and its folder and environment
to the forking interpreter listening on SOCKET, which forks a child that runs ARGV
(``script args`` or ``-m module args``) on them, as ``python ARGV`` would; it then holds
none of the pipes: the server's end is the client's end of them (a server killed is a
closed connection). It stands for the server meanwhile: a signal it gets (the client's
SIGTERM to its process group) is passed to the server, it ends as the server ended (its
exit status, or killed by the same signal), and when its client dies the server is killed
(a server does not outlive its client). Standard library only: about 10 ms of CPU.
"""

import contextlib
import json
import os
import select
import signal
import socket
import sys


def main() -> None:
    path, *argv = sys.argv[1:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.connect(path)
    request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
    socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    pid = int(conn.recv(64).split()[1])

    def forward(signum: int, frame: object = None) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    forwarded = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    for signum in forwarded:
        signal.signal(signum, forward)
    client = os.getppid()
    while True:
        if select.select([conn], [], [], 0.2)[0]:
            reply = conn.recv(64)  # "exit CODE" (negative: the signal), or nothing: gone
            code = int(reply.split()[1]) if reply else 1
            break
        if os.getppid() != client:  # the client died
            forward(signal.SIGKILL)
            client = os.getppid()
    if code < 0:
        if -code in forwarded:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


main()
