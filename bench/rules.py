"""What call rules cost a decision (SPEC §18): the worker's CPU per POST /v1/authorize-tool,
in one run, for
  1. a `Read` with no rule defined (examples/claude-code.yaml without its `rules:`),
  2. the same `Read` with the shipped Claude Code rule set (examples/claude-code.yaml),
  3. a `Bash` pipeline of three commands (`git diff HEAD~N | grep -n TODO | wc -l`, each
     line different, so no parse is served from the cache) under the same rule set,
  4. the same pipeline repeated (the parse cached by its text, as an agent repeats lines).
One request after another on one keep-alive connection, in rounds of 200 of each (the rule
set PUT before a round's rule blocks and deleted after them); the worker's CPU (user +
system, the decision log writer excluded) over each kind's blocks divided by its requests.

    .venv/bin/python bench/rules.py                 # 2,000 of each, SQLite
    .venv/bin/python bench/rules.py --count 500 --database postgres

Prints the figures and their ratios to phase 1; writes bench/results/rules.json.
docs/rules.md and docs/performance.md quote it.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cpu import _cpu_seconds  # noqa: E402
from bench.server import _cmdline, _descendants  # noqa: E402
from tests.serving import TOOLGATE, serve, stop  # noqa: E402

EXAMPLE = ROOT / "examples" / "claude-code.yaml"
CWD = "/work/repo"


def worker_cpu(root: int) -> float:
    """CPU seconds of the server's processes but its decision log writer."""
    pids = [root, *_descendants(root)]
    return sum(_cpu_seconds(pid) for pid in pids if b"app.log.writer" not in _cmdline(pid))


def apply(base: str, admin: str, path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update(TOOLGATE_URL=base, TOOLGATE_TOKEN=admin)
    subprocess.run([TOOLGATE, "apply", "-f", str(path)], check=True, capture_output=True,
                   env=env)


def block(client: httpx.Client, root: int, bodies: list[bytes], expect: bool) -> float:
    """Worker CPU seconds over these decisions, one after another."""
    before = worker_cpu(root)
    for body in bodies:
        r = client.post("/v1/authorize-tool", content=body)
        assert r.status_code == 200, r.text
        assert r.json()["allowed"] is expect, r.text
    time.sleep(0.05)  # the last answers' bookkeeping
    return worker_cpu(root) - before


def run(base: str, admin: str, root: int, count: int, work: Path) -> dict:
    document = yaml.safe_load(EXAMPLE.read_text())
    if "rules" not in document:
        raise SystemExit(f"{EXAMPLE} has no rules: section to measure")
    bare = dict(document)
    bare.pop("rules")
    bare_file = work / "claude-code-without-rules.yaml"
    bare_file.write_text(yaml.safe_dump(bare))
    apply(base, admin, bare_file)  # the registry and profile; the rules are PUT below
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {admin}"}) as c:
        plan_id = c.post("/v1/plans", json={"action_id": "coding"}).json()["plan_id"]

    def call(name: str, args: dict) -> bytes:
        return json.dumps({"plan_id": plan_id, "tool": {"name": name, "args": args},
                           "context": {"sandbox_root": CWD,
                                       "variables": {"HOME": "/home/dev"}}}).encode()

    def read(i: int) -> bytes:
        return call("Read", {"file_path": f"{CWD}/src/module_{i}.py"})

    def pipeline(i: int) -> bytes:
        return call("Bash", {"command": f"git diff HEAD~{i % 50 + 1} -- src/m{i}.py "
                                        f"| grep -n TODO | wc -l"})

    def same_pipeline(_i: int) -> bytes:
        return call("Bash", {"command": "git diff HEAD~1 | grep -n TODO | wc -l"})

    headers = {"Authorization": f"Bearer {admin}", "Content-Type": "application/json"}
    rules = document["rules"]
    kinds = {"no_rules_read_us": read, "rules_read_us": read,
             "rules_bash_pipeline_us": pipeline, "rules_bash_pipeline_cached_us": same_pipeline}
    seconds = dict.fromkeys(kinds, 0.0)
    # Rounds of blocks, the rule set put and deleted between them (outside the measured
    # windows), so that every figure sees the same machine: on a loaded one the CPU a
    # request costs drifts over a minute, and phases run one after the other would carry
    # that drift into their ratios.
    size, rounds = 200, max(1, count // 200)
    with httpx.Client(base_url=base, headers=headers, timeout=30) as c:
        for i in range(200):  # warm-up: caches, connections
            c.post("/v1/authorize-tool", content=read(-1 - i))
        for n in range(rounds):
            numbers = range(n * size, (n + 1) * size)
            seconds["no_rules_read_us"] += block(c, root, [read(i) for i in numbers], True)
            for rule_id, body in rules.items():
                assert c.put(f"/v1/rules/{rule_id}", json=body).status_code in (200, 201)
            c.post("/v1/authorize-tool", content=read(-1))  # the reload, not measured
            for key in ("rules_read_us", "rules_bash_pipeline_us",
                        "rules_bash_pipeline_cached_us"):
                seconds[key] += block(c, root, [kinds[key](i) for i in numbers], True)
            for rule_id in rules:
                assert c.delete(f"/v1/rules/{rule_id}").status_code == 204
            c.post("/v1/authorize-tool", content=read(-1))
    figures = {key: value / (size * rounds) * 1e6 for key, value in seconds.items()}
    return {k: round(v, 1) for k, v in figures.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="toolgate-rules-bench-"))
    name = f"bench_rules_{secrets.token_hex(4)}"
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
        result = run(base, admin, proc.pid, args.count, work)
    finally:
        stop(proc)
        if args.database == "postgres":
            subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc",
                            f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"],
                           capture_output=True)
    base_us = result["no_rules_read_us"]
    print(f"== call rules: worker CPU per decision ({args.count} of each, one at a time, "
          f"{args.database})")
    for key, label in (("no_rules_read_us", "Read, no rule defined"),
                       ("rules_read_us", "Read, the shipped Claude Code rule set"),
                       ("rules_bash_pipeline_us", "Bash pipeline of 3, rule set, each new"),
                       ("rules_bash_pipeline_cached_us",
                        "Bash pipeline of 3, rule set, repeated")):
        print(f"   {label:<44} {result[key]:8.1f} us  {result[key] / base_us:5.2f}x")
    result["database"], result["count"] = args.database, args.count
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "rules.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
