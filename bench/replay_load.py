"""What a replay does to the gate while it runs (issue 30 items 1 and 2), on SQLite:

    python -m bench.replay_load [--rows 200000] [--categories 100000] [--big-rows 4000]

1. A log of `rows` records (bench/replay.py's fill); a `toolgate serve` on it; while one
   replay of the whole log runs (and then four at once), decisions are made one after
   another and `/healthz` is polled: how many decisions answered 503, the slowest decision
   and `/healthz`, and the replays' own status codes.
2. A candidate holding `categories` allowed_skill_categories (about 1 MB) over a log of
   `big-rows` records: its status and time, and the slowest `/healthz` meanwhile; then the
   same with 1,000 categories (the bound, docs/replay.md) and with none.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.replay import ADMIN, MASKED, prepare_sqlite
from tests.serving import serve, stop

AUTH = {"Authorization": f"Bearer {ADMIN}"}
DECISION = {"plan_id": "load-plan", "tool": {"name": "fs.read", "capability": {
    "writes": False, "checkpointable": True, "unsafe": False}}, "context": {}}


def _setup(base: str) -> None:
    with httpx.Client(base_url=base, headers=AUTH, timeout=30) as c:
        c.put("/v1/actions/load-action", json={"project": "web"}).raise_for_status()
        r = c.post("/v1/plans", json={"action_id": "load-action", "plan_id": "load-plan"})
        assert r.status_code in (200, 201), r.text


def _probe(base: str, done: threading.Event, out: dict) -> None:
    """Decisions one after another, and /healthz, until `done`."""
    with httpx.Client(base_url=base, headers=AUTH, timeout=60) as c:
        while not done.is_set():
            started = time.monotonic()
            try:
                r = c.post("/v1/authorize-tool", json=DECISION)
                if r.status_code != 200:
                    out["failed"].append(f"{r.status_code} {r.json()['error']['code']}")
            except httpx.TimeoutException:
                out["failed"].append("no answer within 60 s")
            out["decision_max"] = max(out["decision_max"], time.monotonic() - started)
            out["decisions"] += 1
            started = time.monotonic()
            try:
                c.get("/healthz")
            except httpx.TimeoutException:
                out["failed"].append("/healthz: no answer within 60 s")
            out["healthz_max"] = max(out["healthz_max"], time.monotonic() - started)


def _replays(base: str, n: int, body: dict) -> tuple[list[str], float]:
    results: list[str] = []

    def one() -> None:
        r = httpx.post(f"{base}/v1/replay", headers=AUTH, json=body, timeout=None)
        results.append(str(r.status_code) if r.status_code == 200
                       else f"{r.status_code} {r.text[:120]}")

    started = time.monotonic()
    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.monotonic() - started


def _run(base: str, label: str, n: int, body: dict) -> None:
    done = threading.Event()
    out: dict = {"decisions": 0, "failed": [], "decision_max": 0.0, "healthz_max": 0.0}
    probe = threading.Thread(target=_probe, args=(base, done, out))
    probe.start()
    results, seconds = _replays(base, n, body)
    done.set()
    probe.join()
    failed = out["failed"]
    print(f"{label}: {n} replay(s) in {seconds:.1f} s -> {results}; decisions meanwhile "
          f"{out['decisions']}, not 200: {len(failed)} {sorted(set(failed))}; slowest "
          f"decision {out['decision_max']:.2f} s, slowest /healthz {out['healthz_max']:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--big-rows", type=int, default=4000)  # at least corpus's ~2,967
    parser.add_argument("--categories", type=int, default=100_000)
    parser.add_argument("--part", type=int, choices=(1, 2), help="only this part")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for rows, part in ((args.rows, 1), (args.big_rows, 2)):
            if args.part not in (None, part):
                continue
            sub = folder / str(part)
            sub.mkdir()
            url = prepare_sqlite(rows, sub)
            proc, base = serve({"TOOLGATE_DATABASE_URL": url, "TOOLGATE_ADMIN_TOKEN": ADMIN,
                                "TOOLGATE_MASKED_KEYS": MASKED}, sub / "server.log",
                               timeout=300)
            try:
                _setup(base)
                since = {"since": "2020-01-01T00:00:00Z"}
                if part == 1:
                    _run(base, f"sqlite {rows} records, one replay", 1, since)
                    _run(base, f"sqlite {rows} records, four replays", 4, since)
                else:
                    categories = [f"c{i:05d}" for i in range(args.categories)]
                    body = {**since, "candidate": {"profile": {
                        "require_sandbox": False, "allowed_skill_categories": categories}}}
                    _run(base, f"sqlite {rows} records, {args.categories} categories", 1, body)
                    bounded = {**body, "candidate": {"profile": {
                        "require_sandbox": False, "allowed_skill_categories": categories[:1000]}}}
                    _run(base, f"sqlite {rows} records, 1000 categories (the bound)", 1, bounded)
                    _run(base, f"sqlite {rows} records, no categories", 1, {**body, "candidate": {
                        "profile": {"require_sandbox": False}}})
            finally:
                stop(proc)


if __name__ == "__main__":
    main()
