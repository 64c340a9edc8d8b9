"""Slow clients against `toolgate serve` while normal traffic is served (issue 22, item 3).

    python -m bench.slowloris [--slow 2000] [--seconds 20] [--server-files 1024]

Starts `toolgate serve` from this checkout (or --checkout) on a free loopback port (a fresh SQLite
database), its open-file limit set to --server-files (soft and hard: what `ulimit -n 1024`
gave the red team). Then, for --seconds, `--slow` clients each keep a connection that
sends a request head one header line per --interval seconds and never finishes it
(reconnecting --interval seconds after the server closes it), while normal clients make
--rate requests a second, each on a new connection (POST /v1/authorize-tool and GET
/healthz in turn), and one more makes requests one after the other on a kept-alive
connection. It prints what the slow clients were told (503 at the cap, 408 at the header
deadline, a close) and what the normal requests got (statuses, failures, latency).

Everything stays on 127.0.0.1 and stops by itself; the server is stopped at the end. This
process raises its own open-file limit for the slow clients (up to its hard limit).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-slowloris-token"
HOST = "127.0.0.1"
AUTHORIZE = (b'{"tool": {"name": "fs.read", "capability": {"writes": false, '
             b'"checkpointable": true, "unsafe": false}}, "safety_profile": {}}')


@dataclass
class Seen:
    slow_connected: int = 0
    slow_connect_failed: int = 0
    slow_answers: Counter[str] = field(default_factory=Counter)  # "503", "408", "closed"
    normal: Counter[str] = field(default_factory=Counter)  # "200", "503", "error: ..."
    latencies: list[float] = field(default_factory=list)
    kept_alive: Counter[str] = field(default_factory=Counter)

    def report(self, args: argparse.Namespace) -> str:
        lat = sorted(self.latencies)

        def pct(p: float) -> str:
            return f"{lat[min(len(lat) - 1, int(p * len(lat)))] * 1000:.0f} ms" if lat else "-"

        normal_total = sum(self.normal.values())
        ok = self.normal.get("200", 0)
        lines = [
            f"{args.slow} slow clients for {args.seconds:g} s against a server limited to "
            f"{args.server_files} open files (TOOLGATE_HEADER_TIMEOUT_SECONDS="
            f"{args.header_timeout:g}):",
            f"  slow connections opened: {self.slow_connected} "
            f"(connect failed: {self.slow_connect_failed})",
            "  what the server did with them: " + ", ".join(
                f"{k}: {v}" for k, v in sorted(self.slow_answers.items())),
            f"  normal requests on new connections: {ok}/{normal_total} answered 200; "
            + ", ".join(f"{k}: {v}" for k, v in sorted(self.normal.items()) if k != "200"),
            f"  latency p50 {pct(0.5)}, p99 {pct(0.99)}, max {pct(1.0)}",
            "  requests on one kept-alive connection: " + ", ".join(
                f"{k}: {v}" for k, v in sorted(self.kept_alive.items())),
        ]
        return "\n".join(lines)

    @property
    def normal_failures(self) -> int:
        return sum(v for k, v in self.normal.items() if k != "200") + sum(
            v for k, v in self.kept_alive.items()
            if k not in ("200", "(connections)", "(closed while idle: sent again)"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def raise_own_file_limit(wanted: int) -> int:
    """This process's soft open-file limit raised towards `wanted` (up to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def start_server(folder: Path, port: int, args: argparse.Namespace) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update({
        "PYTHONPATH": os.pathsep.join([str(args.checkout),
                                       *filter(None, [env.get("PYTHONPATH")])]),
        "TOOLGATE_DATABASE_URL": f"sqlite:///{folder / 'toolgate.db'}",
        "TOOLGATE_ADMIN_TOKEN": TOKEN, "TOOLGATE_LOG_LEVEL": "warning",
        "TOOLGATE_HEADER_TIMEOUT_SECONDS": str(args.header_timeout),
    })
    files = args.server_files

    def limit_files() -> None:
        if files:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    toolgate = str(Path(sys.executable).with_name("toolgate"))
    log = open(folder / "serve.log", "ab")  # noqa: SIM115 (kept for the process's life)
    proc = subprocess.Popen([toolgate, "serve", "--port", str(port)], env=env, cwd=folder,
                            stdout=log, stderr=subprocess.STDOUT, preexec_fn=limit_files)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"toolgate exited: {(folder / 'serve.log').read_text()[-2000:]}")
        try:
            with socket.create_connection((HOST, port), timeout=1) as sock:
                sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if sock.recv(64).startswith(b"HTTP/1.1 200"):
                    return proc
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("toolgate did not become ready within 60 s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


async def _status(reader: asyncio.StreamReader) -> str:
    """The status of the answer on `reader` (whose body is read), or why there is none."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = head.split(b" ", 2)[1].decode()
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))
    return status


async def slow_client(port: int, seen: Seen, until: float, interval: float) -> None:
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
        except OSError:
            seen.slow_connect_failed += 1
            await asyncio.sleep(interval)
            continue
        seen.slow_connected += 1
        try:
            writer.write(b"POST /v1/authorize-tool HTTP/1.1\r\nHost: toolgate\r\n")
            n = 0
            while time.monotonic() < until:
                try:  # the server's answer, if it gives one before the next line is due
                    answer = await asyncio.wait_for(reader.read(64), interval)
                except TimeoutError:
                    writer.write(b"X-Slow-%d: %d\r\n" % (n, n))
                    n += 1
                    continue
                seen.slow_answers[answer.split(b" ", 2)[1].decode() if answer else "closed"] += 1
                break
        except (OSError, IndexError):
            seen.slow_answers["closed"] += 1
        finally:
            writer.close()
        await asyncio.sleep(interval)


async def normal_request(port: int, seen: Seen, number: int, timeout: float) -> None:
    if number % 2:
        data = (b"POST /v1/authorize-tool HTTP/1.1\r\nHost: toolgate\r\nConnection: close\r\n"
                b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s"
                % (TOKEN.encode(), len(AUTHORIZE), AUTHORIZE))
    else:
        data = b"GET /healthz HTTP/1.1\r\nHost: toolgate\r\nConnection: close\r\n\r\n"
    start = time.monotonic()
    writer = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), timeout)
        writer.write(data)
        status = await asyncio.wait_for(_status(reader), timeout)
        seen.normal[status] += 1
        seen.latencies.append(time.monotonic() - start)
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        seen.normal[f"error: {type(exc).__name__}"] += 1
    finally:
        if writer is not None:
            writer.close()


async def kept_alive_client(port: int, seen: Seen, until: float, pause: float,
                            timeout: float) -> None:
    reader = writer = None
    request = (b"POST /v1/authorize-tool HTTP/1.1\r\nHost: toolgate\r\n"
               b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s"
               % (TOKEN.encode(), len(AUTHORIZE), AUTHORIZE))
    served = 0  # answers on the current connection
    while time.monotonic() < until:
        try:
            if writer is None:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port),
                                                        timeout)
                seen.kept_alive["(connections)"] += 1
                served = 0
            writer.write(request)
            seen.kept_alive[await asyncio.wait_for(_status(reader), timeout)] += 1
            served += 1
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            if writer is not None:
                writer.close()
            reader = writer = None
            if (served and isinstance(exc, asyncio.IncompleteReadError | ConnectionError)
                    and not getattr(exc, "partial", b"")):
                # An idle kept-alive connection the server closed (under a connection flood
                # it makes room that way) just as the next request went out: HTTP clients
                # send that request again on a new connection, and so does this one.
                seen.kept_alive["(closed while idle: sent again)"] += 1
                continue
            seen.kept_alive[f"error: {type(exc).__name__}"] += 1
        await asyncio.sleep(pause)
    if writer is not None:
        writer.close()


async def load(port: int, args: argparse.Namespace) -> Seen:
    seen = Seen()
    start = time.monotonic()
    until = start + args.seconds
    slow = []
    for n in range(args.slow):  # opened over the first second or so, as a tool would
        slow.append(asyncio.create_task(slow_client(port, seen, until, args.interval)))
        if n % 200 == 199:
            await asyncio.sleep(0.1)
    kept = asyncio.create_task(kept_alive_client(port, seen, until, 1 / args.rate,
                                                 args.timeout))
    normal = []
    number = 0
    while time.monotonic() < until:
        normal.append(asyncio.create_task(normal_request(port, seen, number, args.timeout)))
        number += 1
        await asyncio.sleep(1 / args.rate)
    await asyncio.gather(*normal, kept)
    # Each slow client stops within one interval after `until`.
    await asyncio.wait(slow, timeout=args.interval + 10)
    for task in slow:
        task.cancel()
    return seen


def run(args: argparse.Namespace) -> Seen:
    have = raise_own_file_limit(args.slow + 1024)
    if have < args.slow + 256:
        raise RuntimeError(f"this process may open {have} files; {args.slow} slow clients "
                           "need more (raise the hard limit)")
    with tempfile.TemporaryDirectory(prefix="toolgate-slowloris-") as folder:
        port = _free_port()
        proc = start_server(Path(folder), port, args)
        try:
            return asyncio.run(load(port, args))
        finally:
            stop_server(proc)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--slow", type=int, default=2000, help="slow clients (2000)")
    p.add_argument("--seconds", type=float, default=20.0, help="how long (20)")
    p.add_argument("--interval", type=float, default=1.0,
                   help="seconds between a slow client's header lines (1)")
    p.add_argument("--rate", type=float, default=20.0,
                   help="normal requests a second, each on a new connection (20)")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds a normal request may take before it counts as failed (5)")
    p.add_argument("--server-files", type=int, default=1024,
                   help="the server's open-file limit (1024; 0 leaves it as it is)")
    p.add_argument("--header-timeout", type=float, default=10.0,
                   help="TOOLGATE_HEADER_TIMEOUT_SECONDS for the server (10)")
    p.add_argument("--checkout", type=Path, default=ROOT,
                   help="the toolgate source tree to serve (this one; another to compare)")
    return p


def main() -> None:
    args = parser().parse_args()
    print(run(args).report(args))


if __name__ == "__main__":
    main()
