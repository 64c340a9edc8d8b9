"""wrk as the load generator: install it when missing, run it, parse its report."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

LUA = Path(__file__).with_name("authorize.lua")
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


class WrkMissing(RuntimeError):
    pass


def _apt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["apt-get", *args], capture_output=True, text=True, timeout=240)


def ensure_wrk() -> str:
    """The path of wrk, installing the Debian package when it is missing (we run as root)."""
    if shutil.which("wrk"):
        return shutil.which("wrk") or "wrk"
    print("wrk is not installed: running `apt-get install -y wrk` ...", flush=True)
    try:
        done = _apt("install", "-y", "-qq", "wrk")
        if done.returncode != 0:  # the package lists may be missing or stale
            _apt("update", "-qq")
            done = _apt("install", "-y", "-qq", "wrk")
        reason = (done.stderr or done.stdout).strip()[-400:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = str(exc)
    if shutil.which("wrk"):
        return shutil.which("wrk") or "wrk"
    raise WrkMissing(
        f"could not install wrk with apt-get (it needs root and a Debian mirror): {reason}\n"
        "Install wrk by hand (`apt-get install -y wrk`) and run `make bench` again."
    )


@dataclass
class WrkResult:
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p75_ms: float
    p90_ms: float
    p99_ms: float
    non_2xx: int
    socket_errors: dict[str, int]

    def as_dict(self) -> dict:
        return asdict(self)


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(number) * UNITS[unit]


def parse(output: str) -> WrkResult:
    percentiles = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)\s*$", output, re.M))
    total = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", output)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", output)
    if not (percentiles and total and rps):
        raise ValueError(f"cannot parse wrk output:\n{output}")
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                       output)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return WrkResult(
        requests=int(total.group(1)),
        seconds=_ms(total.group(2) + total.group(3)) / 1e3,
        rps=float(rps.group(1)),
        p50_ms=_ms(percentiles["50"]), p75_ms=_ms(percentiles["75"]),
        p90_ms=_ms(percentiles["90"]), p99_ms=_ms(percentiles["99"]),
        non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        socket_errors=dict(zip(("connect", "read", "write", "timeout"),
                               map(int, errors.groups()), strict=True)) if errors else {},
    )


def run(wrk: str, url: str, body_file: Path, *, token: str, seconds: float,
        threads: int = 2, connections: int = 64) -> WrkResult:
    command = [
        wrk, f"-t{threads}", f"-c{connections}", f"-d{max(1, round(seconds))}s",
        "--timeout", "5s", "--latency", "-s", str(LUA),
        "-H", f"Authorization: Bearer {token}", url, "--", str(body_file),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip()}")
    return parse(done.stdout)
