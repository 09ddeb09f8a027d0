"""``lil ui`` answers only the names of the address it is bound to, and serves an
address the network can reach only when asked, with a token (issue 50, item 8).

Before, ``lil ui --host 127.0.0.2`` answered any Host header (a page elsewhere could
rebind a name of its own to it and read the runs), and ``--host 0.0.0.0`` served
anyone who asked. Over real HTTP, with the real ``lil ui`` as a subprocess.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from letitloop import Journal


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "journal.db"
    with Journal("g", run="r", path=path) as j:
        j.step("a", str, 1)
    return path


def start(db: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """``lil ui --port 0 ARGS`` and the address it printed."""
    ui = subprocess.Popen(
        [sys.executable, "-m", "letitloop", "--db", str(db), "ui", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert ui.stdout is not None
    line = ui.stdout.readline()
    match = re.search(r"(http://\S+)", line)
    assert match, (line, ui.stderr.read() if ui.poll() is not None and ui.stderr else "")
    return ui, match.group(1)


@pytest.fixture
def served(db: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, int, str]]:
    ui, url = start(db, *request.param)
    found = re.match(r"http://(\[[^\]]+\]|[^:/]+):(\d+)/(\S*)", url)
    assert found
    try:
        yield found.group(1).strip("[]"), int(found.group(2)), found.group(3)
    finally:
        ui.send_signal(signal.SIGINT)
        try:
            ui.wait(30)
        except subprocess.TimeoutExpired:
            ui.kill()
            ui.wait(30)


def get(
    address: str, port: int, path: str, host: str, cookie: str | None = None
) -> tuple[int, str, str | None]:
    conn = http.client.HTTPConnection(address, port, timeout=30)
    headers = {"Host": host}
    if cookie:
        headers["Cookie"] = cookie
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    body = response.read().decode("utf-8", "replace")
    conn.close()
    return response.status, body, response.getheader("set-cookie")


class TestALoopbackBind:
    @pytest.mark.parametrize("served", [("--host", "127.0.0.2")], indirect=True)
    def test_another_loopback_address_refuses_a_foreign_host_header(
        self, served: tuple[str, int, str]
    ) -> None:
        address, port, _ = served
        # Before: 200 with the runs page, whatever the Host header said.
        assert get(address, port, "/", f"evil.example:{port}")[0] == 400
        assert get(address, port, "/", f"127.0.0.2:{port}")[0] == 200
        assert get(address, port, "/", f"localhost:{port}")[0] == 200

    @pytest.mark.parametrize("served", [("--host", "127.0.0.1")], indirect=True)
    def test_the_default_address_answers_its_names_only(self, served: tuple[str, int, str]) -> None:
        address, port, _ = served
        assert get(address, port, "/", f"evil.example:{port}")[0] == 400
        assert get(address, port, "/", f"127.0.0.1:{port}")[0] == 200


class TestANonLoopbackBind:
    def test_is_refused_without_allow_remote(self, db: Path) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "letitloop", "--db", str(db), "ui", "--host", "0.0.0.0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        # Before: it served every address of the machine to any Host header.
        assert done.returncode == 1 and done.stdout == ""
        (line,) = done.stderr.splitlines()
        assert "--allow-remote" in line and "network" in line

    @pytest.mark.parametrize("served", [("--host", "0.0.0.0", "--allow-remote")], indirect=True)
    def test_with_allow_remote_serves_only_requests_with_the_token(
        self, served: tuple[str, int, str]
    ) -> None:
        _, port, query = served
        token = query.removeprefix("?token=")
        assert query.startswith("?token=") and len(token) >= 24
        status, body, _ = get("127.0.0.1", port, "/", f"any.example:{port}")
        assert status == 403 and "token" in body
        assert get("127.0.0.1", port, "/?token=wrong", f"any.example:{port}")[0] == 403
        status, _, cookie = get("127.0.0.1", port, f"/?token={token}", f"any.example:{port}")
        assert status == 200 and cookie is not None and "HttpOnly" in cookie
        kept = cookie.split(";")[0]
        assert get("127.0.0.1", port, "/runs/r", f"any.example:{port}", cookie=kept)[0] == 200
        assert (
            get("127.0.0.1", port, "/runs/r", f"any.example:{port}", cookie="lil_ui_token=x")[0]
            == 403
        )
