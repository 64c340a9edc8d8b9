"""A Claude Code PreToolUse answer against a plain POST /v1/authorize-tool (SPEC §15): the
same decision (tool `Read` of examples/claude-code.yaml, on the same plan), timed one
request after another on one keep-alive connection, the two kinds interleaved in rounds so
that both see the same machine. The hook's p50 must be within 1.5x the authorize call's.

    .venv/bin/python bench/hooks.py                 # 2,000 of each, SQLite
    .venv/bin/python bench/hooks.py --count 500 --database postgres

Prints p50/p99 (ms) of each and the ratio of the p50s; writes bench/results/hooks.json.
docs/coding-agents.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.serving import TOOLGATE, serve, stop  # noqa: E402

BOUND = 1.5
SESSION = "bench-session"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="toolgate-hooks-bench-"))
    name = f"bench_hooks_{secrets.token_hex(4)}"
    if args.database == "postgres":
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc",
                        f"CREATE DATABASE {name}"], check=True, capture_output=True)
        url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
        subprocess.run([TOOLGATE, "migrate"], check=True, capture_output=True,
                       env={"PATH": "/usr/bin:/bin", "TOOLGATE_DATABASE_URL": url})
    else:
        url = f"sqlite+aiosqlite:///{work}/bench.db"
    admin = secrets.token_urlsafe(24)
    proc, base = serve({"TOOLGATE_DATABASE_URL": url, "TOOLGATE_ADMIN_TOKEN": admin},
                       work / "server.log", timeout=180)
    try:
        result = run(base, admin, args.count)
    finally:
        stop(proc)
        if args.database == "postgres":
            subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc",
                            f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"],
                           capture_output=True)
    result["database"] = args.database
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "hooks.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


def run(base: str, admin: str, count: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update(TOOLGATE_URL=base, TOOLGATE_TOKEN=admin)
    subprocess.run([TOOLGATE, "apply", "-f", str(ROOT / "examples" / "claude-code.yaml")],
                   check=True, capture_output=True, env=env)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {admin}"}) as c:
        key = c.post("/v1/keys", json={"name": "bench", "role": "agent",
                                       "projects": ["agents"]}).json()["key"]
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    cwd = "/work/repo"

    def hook_body(i: int) -> bytes:
        return json.dumps({
            "session_id": SESSION, "cwd": cwd,
            # Under the agent's folder: the hook reads the home from it (call rules' ~).
            "transcript_path": f"/home/bench/.claude/projects/-work-repo/{SESSION}.jsonl",
            "permission_mode": "default", "hook_event_name": "PreToolUse",
            "tool_name": "Read", "tool_input": {"file_path": f"{cwd}/src/{i}.py"},
            "tool_use_id": f"toolu_bench_{i}"}).encode()

    plan_id = f"session:{SESSION}"

    def authorize_body(i: int) -> bytes:  # what the hook sends the decision, spelled out
        return json.dumps({
            "plan_id": plan_id,
            "tool": {"name": "Read", "args": {"file_path": f"{cwd}/src/{i}.py"}},
            "context": {"sandbox_root": cwd, "variables": {"HOME": "/home/bench"},
                        "metadata": {"hook": "claude-code", "session_id": SESSION,
                                     "tool_use_id": f"toolu_bench_{i}",
                                     "agent_tool": "Read"}}}).encode()

    timings: dict[str, list[float]] = {"hook": [], "authorize": []}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as c:
        def once(kind: str, i: int) -> None:
            path = ("/v1/hooks/claude-code?action=coding" if kind == "hook"
                    else "/v1/authorize-tool")
            body = hook_body(i) if kind == "hook" else authorize_body(i)
            started = time.perf_counter()
            r = c.post(path, content=body)
            elapsed = time.perf_counter() - started
            assert r.status_code == 200, r.text
            answer = r.json()
            allowed = (answer["hookSpecificOutput"]["permissionDecision"] == "allow"
                       if kind == "hook" else answer["allowed"])
            assert allowed, answer
            timings[kind].append(elapsed * 1000)

        once("hook", -1)  # the session's plan is created by its first call
        for i in range(200):  # warm-up: caches, connections
            once("hook", i)
            once("authorize", i)
        timings = {"hook": [], "authorize": []}
        block = 50
        for start in range(0, count, block):  # interleaved rounds, the order alternating
            kinds = ("hook", "authorize") if (start // block) % 2 == 0 else ("authorize",
                                                                             "hook")
            for kind in kinds:
                for i in range(start, min(start + block, count)):
                    once(kind, i)
    result = {kind: {"p50_ms": round(statistics.median(v), 3),
                     "p99_ms": round(percentile(v, 0.99), 3), "n": len(v)}
              for kind, v in timings.items()}
    ratio = result["hook"]["p50_ms"] / result["authorize"]["p50_ms"]
    result["ratio_p50"] = round(ratio, 2)
    result["bound"] = BOUND
    print(f"== coding-agent hooks: {count} PreToolUse answers and {count} authorize-tool "
          "calls, one at a time, interleaved")
    for kind, label in (("hook", "POST /v1/hooks/claude-code (PreToolUse)"),
                        ("authorize", "POST /v1/authorize-tool")):
        print(f"  {label:42s} p50 {result[kind]['p50_ms']:7.3f} ms  "
              f"p99 {result[kind]['p99_ms']:7.3f} ms")
    verdict = "within" if ratio <= BOUND else "OVER"
    print(f"  hook p50 / authorize p50 = {ratio:.2f} ({verdict} the {BOUND}x bound)")
    return result


if __name__ == "__main__":
    sys.exit(main())
