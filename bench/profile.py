"""Where a worker's time goes under load: py-spy samples it while wrk drives it, and the
collapsed stacks are summarised as self time by package and inclusive time by function."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

PY_SPY = Path(sys.executable).with_name("py-spy")

# Self time of a sample goes to the package of its innermost frame.
PACKAGES = (
    ("app/decisions/", "toolgate decision log"),
    ("app/policy/", "toolgate policy core"),
    ("app/authorize/", "toolgate api layer"),
    ("app/auth/", "toolgate auth"),
    ("app/authorize/service.py", "toolgate decide()"),
    ("app/", "toolgate other"),
    ("fastapi/security/", "toolgate auth"),
    ("fastapi/", "fastapi"),
    ("starlette/", "starlette"),
    ("pydantic", "pydantic"),
    ("sqlalchemy/", "sqlalchemy"),
    ("aiosqlite/", "aiosqlite"),
    ("asyncpg/", "asyncpg"),
    ("sqlite3/", "sqlite3"),
    ("uvicorn/", "uvicorn"),
    ("logging/", "logging (stdlib)"),
    ("asyncio/", "asyncio (stdlib)"),
    ("uuid_utils", "uuid_utils"),
    ("anyio/", "anyio (thread pool)"),
)


# Where a request's CPU goes, each sample in exactly one part: the first part whose needle
# is in any frame of the sample's stack, else the part of its innermost known package.
PARTS_ANYWHERE = (
    # First: the protocol's hot route writes answers from inside the acknowledgement reader.
    ("sending the response (uvicorn's send, the socket writes)",
     ("RequestResponseCycle.send (", "_answer (app/authorize/hotpath.py)",
      "_Outbox.flush (app/authorize/hotpath.py)", "._reply (app/authorize/hotpath.py)",
      "write_completed (app/edge/connection.py)", "Cycle.send (app/edge/cycle.py)")),
    ("handing records to the writer process (frame, pipe, acknowledgements)",
     ("DecisionLog._flush", "DecisionLog._read_acks", "asyncio/streams.py",
      "asyncio/unix_events.py")),
    # With TOOLGATE_DECISION_LOG_WRITER=inline (Postgres, one worker) the group commit
    # runs on the worker's loop (InProcess); by default it runs in the writer process.
    ("the group commit in the worker (hashing the chain, asyncpg, answers)",
     ("Writer.run (app/log/writer/loop.py)", "DecisionLog._answer (")),
    ("SQLAlchemy, database drivers (in the worker)",
     ("append (app/log/decision_log.py)", "sqlalchemy/", "aiosqlite/", "asyncpg/")),
    ("access log (stdlib logging)", ("logging/",)),
    ("auth (bearer, key, role)", ("app/auth/", "fastapi/security/", "_key_hash (")),
    ("decide(): registry, policy core, record",
     ("decide (app/authorize/service.py)", "decide_with (app/authorize/service.py)")),
    ("waiting for the group commit (future)", ("DecisionLog.write (",)),
    ("body validation (msgspec; pydantic for what it refuses)",
     ("decode_authorize_json (", "decode_authorize (", "pydantic")),
    ("sync dependencies through the AnyIO thread pool",
     ("anyio/", "starlette/concurrency.py", "threading.py")),
    ("FastAPI dependency solving", ("fastapi/dependencies/",)),
    ("the rest of the fast path (app/authorize/hotpath.py)", ("app/authorize/hotpath.py",)),
    ("toolgate's HTTP protocol (app/edge/connection.py, deadlines.py, cycle.py)",
     ("app/edge/connection.py", "app/edge/deadlines.py", "app/edge/cycle.py")),
    ("the rest of the FastAPI route", ("authorize_tool (app/authorize/",)),
)
PARTS_INNERMOST = {
    "uvicorn": "uvicorn: HTTP parsing, transport",
    "fastapi": "FastAPI/Starlette middleware, routing, Request objects",
    "starlette": "FastAPI/Starlette middleware, routing, Request objects",
    "toolgate api layer": "FastAPI/Starlette middleware, routing, Request objects",
    "asyncio (stdlib)": "event loop (asyncio)",
}


def _part(frames: list[tuple[str, str]]) -> str:
    names = [f"{function} ({file})" for function, file in frames]
    for part, needles in PARTS_ANYWHERE:
        if any(needle in name for name in names for needle in needles):
            return part
    return PARTS_INNERMOST.get(_owner(frames), "other")


def ensure_py_spy() -> str | None:
    """None when py-spy is in the venv (installing it if needed), else why not."""
    if PY_SPY.exists():
        return None
    print("py-spy is not installed: `pip install py-spy` into the venv ...", flush=True)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "py-spy"],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or not PY_SPY.exists():
        return "pip install py-spy failed: " + (done.stderr or done.stdout).strip()[-300:]
    return None


def record(pid: int, seconds: float, out: Path, *, rate: int = 200) -> None:
    """Sample the threads of `pid` that hold the GIL (Python CPU time; a thread waiting on
    a lock or on I/O is not counted). Sampling pauses the worker briefly each time."""
    command = [str(PY_SPY), "record", "--pid", str(pid), "--duration", str(round(seconds)),
               "--rate", str(rate), "--format", "raw", "--output", str(out), "--nolineno",
               "--threads", "--gil"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"py-spy failed ({done.returncode}): {done.stderr.strip()[-500:]}")


FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^()]*)\)$")


def _frames(stack: str) -> tuple[str, list[tuple[str, str]]]:
    parts = stack.split(";")
    thread = next((p for p in parts if p.startswith("thread ")), "thread ?")
    frames = []
    for part in parts:
        match = FRAME.match(part)
        if match and not part.startswith(("thread ", "process ")):
            frames.append((match["function"], match["file"]))
    return thread, frames


def _owner(frames: list[tuple[str, str]]) -> str:
    """The package of the innermost frame that belongs to one of PACKAGES: time spent in
    generic stdlib helpers (copy, weakref, threading...) counts for their caller."""
    for _, file in reversed(frames):
        for needle, name in PACKAGES:
            if needle in file:
                return name
    return "other"


# Frames every sample of the main thread passes through: not worth listing.
WRAPPERS = ("typer/", "(toolgate)", "uvicorn/main.py", "uvicorn/server.py", "uvicorn/_compat.py",
            "asyncio/runners.py", "app/cli/main.py", "threading.py")


def summarise(raw: str, *, top: int = 25) -> dict[str, Any]:
    samples = 0
    threads: Counter[str] = Counter()
    thread_top: dict[str, Counter[str]] = {}
    packages: Counter[str] = Counter()
    parts: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        thread, frames = _frames(stack)
        samples += count
        threads[thread] += count
        if not frames:
            continue
        # The outermost frame names what the thread is (event loop, sqlite worker...).
        thread_top.setdefault(thread, Counter())[f"{frames[0][0]} ({frames[0][1]})"] += count
        function, file = frames[-1]
        packages[_owner(frames)] += count
        parts[_part(frames)] += count
        self_time[f"{function} ({file})"] += count
        for name in {f"{f} ({path})" for f, path in frames}:
            inclusive[name] += count

    def share(counter: Counter[str], n: int) -> list[dict[str, Any]]:
        return [{"frame": k, "percent": round(100 * v / samples, 1)}
                for k, v in counter.most_common(n)]

    return {
        "samples": samples,
        "threads": [{"thread": t, "percent": round(100 * c / samples, 1),
                     "entry": thread_top.get(t, Counter()).most_common(1)[0][0]
                     if thread_top.get(t) else None}
                    for t, c in threads.most_common()],
        "parts": share(parts, len(parts)),
        "self_by_package": share(packages, len(packages)),
        "self_by_frame": share(self_time, top),
        "inclusive_by_frame": share(Counter({k: v for k, v in inclusive.items()
                                             if not any(w in k for w in WRAPPERS)}), top * 2),
    }


def print_summary(summary: dict[str, Any], log: Any = print, top: int = 12) -> None:
    log(f"  {summary['samples']} samples (all threads, idle excluded)")
    for row in summary["threads"]:
        log(f"  thread {row['thread']}: {row['percent']}%  [{row['entry']}]")
    log("  where the CPU goes (each sample counted once):")
    for row in summary["parts"]:
        log(f"    {row['percent']:5.1f}%  {row['frame']}")
    log("  self time by package:")
    for row in summary["self_by_package"]:
        log(f"    {row['percent']:5.1f}%  {row['frame']}")
    log("  inclusive time, top frames (outer wrappers left out):")
    for row in summary["inclusive_by_frame"][:top * 2]:
        log(f"    {row['percent']:5.1f}%  {row['frame']}")
