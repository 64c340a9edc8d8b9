"""One real `toolgate serve` per test module, with an agent's mapping applied as a user
applies it (`toolgate apply -f examples/<agent>.yaml`) and an agent key of the project
`agents`; the decisions the log holds for a session."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from app.hooks.claude import session_plan_id
from tests.serving import TOOLGATE, serve, stop

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "tg_agents_admin_token"


def admin(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"},
                        timeout=30)


@contextmanager
def toolgate_with(mapping: str, folder: Path) -> Iterator[dict[str, str]]:
    """`{"url", "token"}` of a served toolgate (SQLite) with `mapping` applied."""
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{folder}/toolgate.db",
                       "TOOLGATE_ADMIN_TOKEN": ADMIN}, folder / "server.log", timeout=180)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
        env.update(TOOLGATE_URL=url, TOOLGATE_TOKEN=ADMIN)
        applied = subprocess.run([TOOLGATE, "apply", "-f", mapping], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=120)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        with admin(url) as c:
            r = c.post("/v1/keys", json={"name": "coding-agent", "role": "agent",
                                         "projects": ["agents"]})
            assert r.status_code == 201, r.text
        yield {"url": url, "token": r.json()["key"]}
    finally:
        stop(proc)


def decisions(url: str, session_id: str) -> list[dict[str, Any]]:
    """The authorize decisions of one agent session (its plan), oldest first."""
    with admin(url) as c:
        r = c.get("/v1/decisions", params={"plan_id": session_plan_id(session_id)})
        assert r.status_code == 200, r.text
        return sorted((d for d in r.json()["items"] if d["kind"] == "authorize"),
                      key=lambda d: d["seq"] if "seq" in d else d["decision_id"])


def stored(url: str, decision_id: str) -> dict[str, Any]:
    with admin(url) as c:
        r = c.get(f"/v1/decisions/{decision_id}")
        assert r.status_code == 200, r.text
        return r.json()
