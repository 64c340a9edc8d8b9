"""`toolgate replay` against a real `toolgate serve`: the transitions table, and the exit
status a policy repository's CI gates on."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.serving import serve, stop

TOOLGATE = str(Path(sys.executable).with_name("toolgate"))
TOKEN = "test-admin-token"
WRITER = {"name": "fs.write", "capability": {"writes": True, "checkpointable": True,
                                             "unsafe": False}}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("cli-replay")
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp / 'toolgate.db'}",
                       "TOOLGATE_ADMIN_TOKEN": TOKEN}, tmp / "server.log")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        httpx.put(f"{url}/v1/actions/deploy", headers=headers, json={"project": "web"})
        r = httpx.post(f"{url}/v1/plans", headers=headers,
                       json={"action_id": "deploy", "plan_id": "p-1"})
        assert r.status_code == 201, r.text
        for sandbox in (None, None, "sb-1"):  # two denies (no sandbox), one allow
            r = httpx.post(f"{url}/v1/authorize-tool", headers=headers, json={
                "plan_id": "p-1", "tool": WRITER, "context": {"sandbox_id": sandbox}})
            assert r.status_code == 200, r.text
        yield url
    finally:
        stop(proc)


def _run(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLGATE_URL", "TOOLGATE_TOKEN")}
    return subprocess.run([TOOLGATE, "replay", "--since", "2020-01-01T00:00:00Z", *args,
                           "--url", url, "--token", TOKEN],
                          env=env, capture_output=True, text=True, timeout=60)


def _candidate(tmp_path: Path, text: str) -> str:
    path = tmp_path / "candidate.yaml"
    path.write_text(text)
    return str(path)


def test_a_named_transition_exits_1_with_the_table(server, tmp_path):
    loose = _candidate(tmp_path, "profile:\n  require_sandbox: false\n")
    r = _run("-f", loose, "--fail-on", "deny_to_allow", url=server)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "replayed 3 decisions" in r.stdout
    assert "deny -> allow 2" in r.stdout
    row = next(line for line in r.stdout.splitlines() if "sandbox_required" in line
               and "allow" in line and "fs.write" not in line)
    assert row.split() == ["sandbox_required", "allow", "2"]
    assert "fs.write  plan p-1: sandbox_required -> allow" in r.stdout
    assert "deny_to_allow transitions occur" in r.stderr
    # The other direction does not occur: exit 0.
    r = _run("-f", loose, "--fail-on", "allow_to_deny", url=server)
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_unchanged_candidate_passes_any(server, tmp_path):
    r = _run("-f", _candidate(tmp_path, "# nothing changes\n"), "--fail-on", "any",
             url=server)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "changed: 0" in r.stdout


def test_a_bad_candidate_exits_2_naming_the_problem(server, tmp_path):
    r = _run("-f", _candidate(tmp_path, "profile: {}\npolicies: []\n"), url=server)
    assert r.returncode == 2 and "unknown key 'policies'" in r.stderr
    # rules: is a candidate's key (SPEC §18): a mapping of rule ids to rules
    r = _run("-f", _candidate(tmp_path, "rules: []\n"), url=server)
    assert r.returncode == 2 and "candidate.rules" in r.stderr, r.stderr
    r = _run("-f", _candidate(tmp_path, "profile:\n  require_sandbox: yes\n"), url=server)
    assert r.returncode == 2 and "candidate.profile.require_sandbox" in r.stderr
    r = _run("-f", str(tmp_path / "missing.yaml"), url=server)
    assert r.returncode == 2 and "cannot read" in r.stderr
