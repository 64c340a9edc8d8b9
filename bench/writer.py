"""The decision log writer's capacity: records per second one writer process commits when
frames arrive faster than it can take them. Under `toolgate serve --workers N` every worker
hands its records to one shared writer, so this is the ceiling of a server's durable
decisions per second, whatever the worker count (docs/performance.md).

The frames are what a worker sends (`DecisionLog._send`): 32 records of the benchmark's
own decision, each detail as its canonical text, a new decision id (a UUIDv7, as the
service makes them: random ones would scatter the unique index's inserts over its pages)
and time per record.
All of them are written to the writer's stdin at once; the clock stops when the last frame
is acknowledged. CPU is the writer's user + system time over the same span (start-up and
connecting excluded)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from uuid_utils import uuid7

from bench import server as srv
from bench.cpu import _cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
FRAME = 32  # records per frame: FRAME_REQUESTS, one record each
DATABASE = f"{srv.PG_DATABASE}_writer"


def frames(record: dict[str, Any], count: int, first: int = 1, size: int = FRAME) -> bytes:
    """`count` frames of `size` records as a worker writes them to the pipe, one line
    each, numbered from `first`."""
    from app.log.chain import canonical_details

    lines = []
    for number in range(first, first + count):
        batch = []
        for _ in range(size):
            one = copy.deepcopy(record)
            one["decision_id"], one["created_at"] = str(uuid7()), time.time_ns()
            batch.append(one)
        lines.append(orjson.dumps([number, canonical_details(batch)]) + b"\n")
    return b"".join(lines)


def capacity(url: str, warmup: bytes, data: bytes, count: int, *,
             timeout: float = 120) -> dict[str, Any]:
    """Feed `warmup` (one frame), then `data` (count frames), to a private writer process
    on `url`; every frame must be acknowledged without an error, within `timeout`."""
    from app.log.writer.start import writer_config

    config = writer_config(url, max_batch=512, timeout=30, sqlite_synchronous="FULL")
    with tempfile.TemporaryFile() as errors:  # the writer's log: shown if it fails
        process = subprocess.Popen([sys.executable, "-m", "app.log.writer"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=errors, cwd=ROOT)
        watchdog = threading.Timer(timeout, process.kill)  # a writer that hangs is stopped
        watchdog.start()
        try:
            answered, failed, seconds, cpu = _feed(process, config, warmup, data, count)
        finally:
            watchdog.cancel()
            if process.poll() is None:
                process.kill()
            process.wait()
        if answered != count or failed:
            errors.seek(0)
            raise RuntimeError(f"{answered} of {count} frames answered, {failed} failed: "
                               f"{errors.read()[-1500:].decode(errors='replace')}")
    records = count * FRAME
    return {"records": records, "seconds": round(seconds, 3),
            "records_per_s": round(records / seconds), "cpu_us_per_record":
            round(cpu / records * 1e6, 1)}


def _feed(process: subprocess.Popen, config: dict[str, Any], warmup: bytes, data: bytes,
          count: int) -> tuple[int, int, float, float]:
    """(frames answered, of which failed, seconds, writer CPU seconds) from the first byte
    of `data` to the last acknowledgement."""
    stdin, stdout = process.stdin, process.stdout
    assert stdin is not None and stdout is not None
    # The warm-up frame's answer means the store is open and the first batch (on Postgres
    # the connection and the locking first batch) is behind it.
    stdin.write(orjson.dumps(config) + b"\n" + warmup)
    stdin.flush()
    first = orjson.loads(stdout.readline() or b"[0, \"the writer exited\"]")
    if first[1] is not None:
        return 0, 1, 0.0, 0.0
    cpu_before, started = _cpu_seconds(process.pid), time.perf_counter()

    def feed() -> None:
        stdin.write(data)
        stdin.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    answered = failed = 0
    for line in stdout:
        answered += 1
        failed += orjson.loads(line)[1] is not None
        if answered == count:
            break
    seconds = time.perf_counter() - started
    cpu = _cpu_seconds(process.pid) - cpu_before
    process.wait()  # the watchdog bounds these
    feeder.join()
    return answered, failed, seconds, cpu


def bench_record() -> dict[str, Any]:
    """The log record of the benchmark's decision, as decide() makes it on the hot path."""
    from bench import core

    _, _, profile = core.inputs()
    _, record = core.cached_decide(profile)()
    return record


def run(log: Callable[[str], None] = print, count: int = 600) -> dict[str, Any]:
    """Both databases (Postgres when it answers), each on a fresh, migrated database."""
    from app.store import migrate

    record = bench_record()
    warmup, data = frames(record, 1, first=0, size=1), frames(record, count)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="toolgate-writer-") as folder:
        targets = {"sqlite": srv.sqlite_url(Path(folder) / "log.db")}
        down = srv.postgres_unreachable()
        if down:
            results["postgres"] = {"skipped": f"Postgres unreachable: {down}"}
            log(f"  Postgres skipped: {down}")
        else:
            srv.recreate_postgres(DATABASE)
            targets["postgres"] = srv.pg_url(DATABASE)
        for name, url in targets.items():
            try:
                migrate.upgrade(url)
                results[name] = row = capacity(url, warmup, data, count)
            except Exception as exc:  # reported, and the rest of the bench goes on
                results[name] = {"error": str(exc)[:2000]}
                log(f"  {name}: FAILED {exc}")
                continue
            log(f"  {name:9s} {row['records_per_s']:9,} records/s   writer CPU "
                f"{row['cpu_us_per_record']:6.1f} µs/record   ({row['records']:,} records "
                f"in {row['seconds']:.2f} s)")
    return results


if __name__ == "__main__":  # .venv/bin/python -m bench.writer
    os.chdir(ROOT)
    run()
