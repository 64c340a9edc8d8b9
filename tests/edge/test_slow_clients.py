"""`toolgate serve` itself, over real sockets: 2,000 slow clients (a head sent a line at a
time, never finished) against a server limited to 1,024 open files, while normal traffic is
served (issue 22 item 3: 1,100 of them made every other request fail for 25 s); and a 413
answered to a client still sending its body, which it must be able to read (item 10).
bench/slowloris.py prints the same run's figures."""

from __future__ import annotations

import resource
import socket
import time

import pytest

from bench import slowloris
from tests.conftest import ADMIN_TOKEN
from tests.serving import serve, stop

pytestmark = pytest.mark.slow


def test_normal_traffic_is_served_through_2000_slow_clients():
    args = slowloris.parser().parse_args([
        "--slow", "2000", "--seconds", "8", "--header-timeout", "2", "--interval", "0.5",
        "--rate", "10", "--timeout", "60", "--server-files", "1024"])
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < args.slow + 256:
        pytest.skip(f"this machine lets a process open {hard} files; 2,000 clients need more")
    seen = slowloris.run(args)
    report = seen.report(args)
    print(report)
    assert seen.slow_connected >= args.slow, report
    # The server made room (503 to the connection that waited longest) or timed them out.
    assert seen.slow_answers["503"] + seen.slow_answers["408"] > 0, report
    assert sum(seen.normal.values()) > 0 and seen.kept_alive["200"] > 0, report
    assert seen.normal_failures == 0, report


def test_a_413_reaches_a_client_still_sending_its_body(tmp_path):
    """Connection: close and 2 MiB declared, sent after the head at a modest pace: the
    server answers before reading the body, and the client reads that answer once it has
    sent everything, instead of a broken pipe."""
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite:///{tmp_path / 't.db'}",
                       "TOOLGATE_ADMIN_TOKEN": ADMIN_TOKEN}, tmp_path / "serve.log")
    port = int(url.rsplit(":", 1)[1])
    size = 2 * 1024 * 1024
    try:
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(b"POST /v1/authorize-tool HTTP/1.1\r\nHost: t\r\n"
                             b"Authorization: Bearer %s\r\nConnection: close\r\n"
                             b"Content-Length: %d\r\n\r\n" % (ADMIN_TOKEN.encode(), size))
                time.sleep(0.05)  # the answer is on its way before the body
                for _ in range(size // 65536):
                    sock.sendall(b"x" * 65536)
                answer = b""
                while chunk := sock.recv(65536):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 413 "), answer[:100]
            assert b'"payload_too_large"' in answer
    finally:
        stop(proc)
