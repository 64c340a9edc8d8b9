"""Where the machine's CPU goes during a load run, per answered request: the server's
workers, its decision log writer, Postgres (every `postgres` process: the backends doing the
inserts, the WAL writer) and wrk itself. On a small machine they all share the same cores,
so a microsecond saved in any of them is one the worker can use."""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

from bench import server as srv

TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system time of one process (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _idle_and_total() -> tuple[float, float]:
    values = [float(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return values[3] + values[4], sum(values)  # idle + iowait


class Meter:
    """Snapshot before the measured load, `per_request` after it."""

    def __init__(self, server: srv.Server, *, postgres: bool) -> None:
        workers = server.worker_pids()
        assert server.process is not None
        writers = [pid for pid in srv._descendants(server.process.pid)
                   if b"app.log.writer" in srv._cmdline(pid)]
        self.groups: dict[str, list[int]] = {"worker": workers, "log writer": writers}
        if postgres:
            self.groups["postgres"] = _postgres_pids()
        self._before = self._read()

    def _read(self) -> dict[str, float]:
        out = {name: sum(map(_cpu_seconds, pids)) for name, pids in self.groups.items()}
        # wrk runs as this process's child: its time is counted once it has been waited for.
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        out["wrk"] = children.ru_utime + children.ru_stime
        out["_idle"], out["_total"] = _idle_and_total()
        return out

    def per_request(self, requests: int) -> dict[str, Any]:
        after = self._read()
        spent = {name: after[name] - self._before[name] for name in after}
        total = spent.pop("_total")
        idle = spent.pop("_idle")
        us = {name: round(seconds / requests * 1e6, 1) for name, seconds in spent.items()
              if self.groups.get(name, True)}  # no column for a process the server lacks
        return {"cpu_us_per_request": us,
                "machine_idle_pct": round(idle / total * 100, 1) if total else None}
