"""The Python client and the configuration-as-code verbs against a real toolgate.

Each server is `toolgate serve` in a subprocess on a free loopback port, with its own SQLite
file and TOOLGATE_ADMIN_TOKEN set; every request carries that token. The suite needs the
client installed (`make test` installs it editable, from uv.lock).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import toolgate_client
from toolgate_client import (
    CODES,
    PARENTS,
    AsyncClient,
    Client,
    PlanReadOnlyError,
    SkillExecutionError,
    ToolAccessDeniedError,
    ToolConfirmationRequiredError,
    ToolgateDeny,
    ToolgateRequestError,
    ToolgateUnavailableError,
    ToolSafetyViolationError,
    ToolSandboxEscapeError,
    ToolSandboxRequiredError,
    error_class_for,
    hierarchy_of,
)

TOOLGATE = str(Path(sys.executable).with_name("toolgate"))
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"
ADMIN_TOKEN = "tg_test_admin_" + secrets.token_urlsafe(24)
STARTUP_SECONDS = 60
READ = {"writes": False, "checkpointable": True, "unsafe": False}

# End to end: real `toolgate serve` processes. `make test` runs these last.
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TOOLGATE_") or k == "TOOLGATE_REQUIRE_POSTGRES"}
    return {**env, **extra}


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)


def _start(directory: Path) -> Server:
    port = _free_port()
    env = _environment(
        TOOLGATE_DATABASE_URL=f"sqlite+aiosqlite:///{directory / 'toolgate.db'}",
        TOOLGATE_ADMIN_TOKEN=ADMIN_TOKEN,
        TOOLGATE_LOG_LEVEL="warning",
    )
    log = directory / "server.log"
    with open(log, "wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen([TOOLGATE, "serve", "--host", "127.0.0.1", "--port", str(port)],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", proc, log)
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        if proc.poll() is not None:
            pytest.fail(f"toolgate serve exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{server.url}/healthz", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            pytest.fail(f"toolgate serve did not answer /healthz within {STARTUP_SECONDS} s:\n"
                        f"{log.read_text()}")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def start_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Server]]:
    """Starts servers on demand; every one is stopped at the end of the session."""
    started: list[Server] = []

    def start() -> Server:
        started.append(_start(tmp_path_factory.mktemp("toolgate")))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def toolgate(start_server: Callable[[], Server]) -> Server:
    return start_server()


@pytest.fixture
def admin(toolgate: Server) -> Iterator[Client]:
    with Client(toolgate.url, token=ADMIN_TOKEN, timeout=10) as client:
        yield client


def _agent_token(admin: Client, project: str) -> str:
    """An agent-role key for one project when the service issues keys; else the admin token."""
    try:
        return admin.request("POST", "/v1/keys", {"name": "live-agent", "role": "agent",
                                                  "projects": [project]})["key"]
    except ToolgateRequestError as exc:
        if exc.status in (404, 405):  # no key management in this build
            return ADMIN_TOKEN
        raise


# --- 1. an agent loop, as a user writes it -----------------------------------------------

def test_agent_loop_gets_the_exact_class_for_each_deny(admin: Client, toolgate: Server,
                                                       tmp_path: Path) -> None:
    # The operator's side: a profile, the registry, two actions, two plans.
    assert isinstance(admin.request("GET", "/v1/tools")["items"], list)
    admin.request("PUT", "/v1/profiles/agent-strict", {"description": "live test", "safety": {
        "require_sandbox": True, "require_checkpoints": True, "allow_unsafe_tools": False}})
    admin.request("PUT", "/v1/tools/agent.fs.write", {
        "capability": {"writes": True, "checkpointable": True, "unsafe": False},
        "safety_category": "destructive", "path_args": ["path"]})
    admin.request("PUT", "/v1/tools/agent.shell", {
        "capability": {"writes": True, "checkpointable": True, "unsafe": True},
        "safety_category": "safe"})
    for action, read_only in (("agent-review", True), ("agent-work", False)):
        admin.request("PUT", f"/v1/actions/{action}", {
            "project": "agent-project", "read_only": read_only,
            "automation_profile": "agent-strict"})
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()

    # The agent's side.
    agent = Client(toolgate.url, token=_agent_token(admin, "agent-project"), timeout=10)
    review = agent.create_plan("agent-review", plan_id="live-review-1")["plan_id"]
    work = agent.create_plan("agent-work", plan_id="live-work-1")["plan_id"]
    assert agent.get_plan(review)["read_only"] is True
    written: list[str] = []
    shell_runs: list[str] = []

    def write_context(sandbox_id: str | None = None, confirmed: bool = False) -> dict:
        return {"sandbox_id": sandbox_id, "sandbox_root": str(sandbox), "confirmed": confirmed}

    @agent.guard(tool=lambda path: {"name": "agent.fs.write", "args": {"path": path}},
                 plan_id=lambda plan: plan, context=write_context)
    def write_file(plan: str, path: str, text: str, sandbox_id: str | None = None,
                   confirmed: bool = False) -> str:
        Path(path).write_text(text)
        written.append(path)
        return f"wrote {path}"

    @agent.guard(tool=lambda path: {"name": "agent.fs.write", "args": {"path": path}},
                 plan_id=lambda plan: plan, layer="skill")
    def skill_write(plan: str, path: str) -> str:
        written.append(path)
        return "skill wrote"

    @agent.guard(tool={"name": "agent.shell"}, plan_id=lambda plan: plan,
                 context=lambda sandbox_id=None: {"sandbox_id": sandbox_id})
    def run_shell(plan: str, command: str, sandbox_id: str | None = None) -> str:
        shell_runs.append(command)
        return "ran"

    def execute_plan(plan: str) -> str:  # no client method for transitions: the generic call
        agent.request("POST", f"/v1/plans/{plan}/execute")
        return "executing"

    tools = {"write_file": write_file, "skill_write": skill_write, "run_shell": run_shell,
             "execute_plan": execute_plan}
    inside, outside = str(sandbox / "notes.txt"), str(tmp_path / "escaped.txt")
    steps = [  # what a model would ask for, in order
        ("write_file", {"plan": review, "path": inside, "text": "x"}),
        ("write_file", {"plan": work, "path": inside, "text": "x"}),
        ("run_shell", {"plan": work, "command": "make deploy", "sandbox_id": "sb-1"}),
        ("write_file", {"plan": work, "path": inside, "text": "x", "sandbox_id": "sb-1"}),
        ("write_file", {"plan": work, "path": inside, "text": "hello", "sandbox_id": "sb-1",
                        "confirmed": True}),
        ("write_file", {"plan": work, "path": outside, "text": "x", "sandbox_id": "sb-1",
                        "confirmed": True}),
        ("skill_write", {"plan": review, "path": inside}),
        ("execute_plan", {"plan": review}),
    ]
    transcript: list[object] = []
    for name, args in steps:
        try:
            observation: object = tools[name](**args)
        except ToolgateDeny as deny:  # tell the model why; the tool did not run
            observation = deny
        transcript.append(observation)

    expected = [
        (ToolAccessDeniedError, "read_only"),
        (ToolSandboxRequiredError, "sandbox_required"),
        (ToolSafetyViolationError, "unsafe_tool"),
        (ToolConfirmationRequiredError, "confirmation_required"),
        "wrote " + inside,
        (ToolSandboxEscapeError, "sandbox_path_escape"),
        (SkillExecutionError, "write_denied"),
        (PlanReadOnlyError, "plan_read_only"),
    ]
    assert [(type(o), o.code) if isinstance(o, ToolgateDeny) else o for o in transcript] \
        == expected
    denies = [o for o in transcript if isinstance(o, ToolgateDeny)]
    assert all(d.decision_id for d in denies if not isinstance(d, PlanReadOnlyError))
    assert str(transcript[0]) == (f"Tool 'agent.fs.write' has writes=True but plan '{review}' "
                                  "is read-only")
    assert transcript[6].error_type == "PERMISSION_DENIED"
    assert transcript[7].status == 409
    assert written == [inside] and (sandbox / "notes.txt").read_text() == "hello"
    assert shell_runs == [] and not Path(outside).exists()
    assert agent.get_plan(review)["state"] == agent.get_plan(work)["state"]  # nothing moved
    agent.close()


# --- 2. the client's classes are the service's ------------------------------------------

def test_client_error_classes_match_the_service(admin: Client) -> None:
    served = admin.errors()["errors"]
    assert sorted(e["error"] for e in served) == sorted(CODES)
    for entry in served:
        name = entry["error"]
        cls = error_class_for(name)
        assert cls is getattr(toolgate_client, name)
        assert PARENTS[name] == entry["parent"], name
        assert list(CODES[name]) == entry["codes"], name
        assert hierarchy_of(name) == entry["hierarchy"], name
        parent = cls.__bases__[0]
        assert (parent is ToolgateDeny) if entry["parent"] is None \
            else parent.__name__ == entry["parent"], name
        assert not issubclass(cls, ToolgateUnavailableError)


# --- 3. no server, no decision --------------------------------------------------------------

def test_enforce_raises_unavailable_when_the_server_stops(
        start_server: Callable[[], Server]) -> None:
    server = start_server()
    client = Client(server.url, token=ADMIN_TOKEN, timeout=2, retries=1, backoff=0.01)
    reads: list[int] = []

    @client.guard(tool={"name": "fs.read", "capability": READ})
    def read(step: int) -> str:
        reads.append(step)
        return "read"

    outcome: list[str] = []
    for step in range(5):
        if step == 2:
            server.stop()
        try:
            outcome.append(read(step))
        except ToolgateUnavailableError as exc:  # fail closed: stop, do not guess
            assert not isinstance(exc, ToolgateDeny)
            outcome.append("unavailable")
            break
    assert outcome == ["read", "read", "unavailable"] and reads == [0, 1]
    with pytest.raises(ToolgateUnavailableError):
        client.enforce(tool={"name": "fs.read", "capability": READ})
    client.close()

    async def enforce_async() -> None:
        async with AsyncClient(server.url, token=ADMIN_TOKEN, timeout=2, retries=0) as ac:
            await ac.enforce(tool={"name": "fs.read", "capability": READ})

    with pytest.raises(ToolgateUnavailableError):
        asyncio.run(enforce_async())


# --- 4. configuration as code -------------------------------------------------------------

@pytest.fixture(scope="session")
def policy_server(start_server: Callable[[], Server]) -> Server:
    return start_server()


def toolgate_cli(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOLGATE, *args, "--url", server.url, "--token", ADMIN_TOKEN],
                          env=_environment(), capture_output=True, text=True, timeout=120)


def export_text(server: Server, path: Path) -> str:
    result = toolgate_cli(server, "export", "-o", str(path))
    assert result.returncode == 0, result.stderr
    return path.read_text()


def test_apply_is_idempotent_and_export_round_trips(policy_server: Server,
                                                    tmp_path: Path) -> None:
    first = toolgate_cli(policy_server, "apply", "-f", str(EXAMPLE))
    assert first.returncode == 0, first.stderr
    assert "+ profile strict" in first.stdout and "Applied " in first.stdout

    second = toolgate_cli(policy_server, "apply", "-f", str(EXAMPLE))
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith("No changes (") and "Applied" not in second.stdout
    dry = toolgate_cli(policy_server, "apply", "-f", str(EXAMPLE), "--dry-run")
    assert dry.stdout.startswith("No changes (")

    exported = export_text(policy_server, tmp_path / "export.yaml")
    again = toolgate_cli(policy_server, "apply", "-f", str(tmp_path / "export.yaml"))
    assert again.returncode == 0 and again.stdout.startswith("No changes ("), again.stdout
    assert export_text(policy_server, tmp_path / "export2.yaml") == exported

    with Client(policy_server.url, token=ADMIN_TOKEN) as client:
        versions = client.request("GET", "/v1/profiles/strict/versions")["items"]
        assert len(versions) == 1  # applying twice made no new version
        assert client.request("GET", "/v1/config")["automation_profile"] == "strict"
        assert client.request("GET", "/v1/actions/explore")["safety_profile"]["max_cost_per_plan"] \
            == 1.0


def _line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def test_an_invalid_file_is_rejected_whole_with_its_line(policy_server: Server,
                                                          tmp_path: Path) -> None:
    toolgate_cli(policy_server, "apply", "-f", str(EXAMPLE))
    before = export_text(policy_server, tmp_path / "before.yaml")
    text = EXAMPLE.read_text()
    # A new profile first (it would be created first), then a bad value further down.
    text = text.replace("profiles:\n", "profiles:\n  brand-new: {description: new}\n", 1)
    text = text.replace("max_retries_per_step: 2", "max_retries_per_step: many")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    result = toolgate_cli(policy_server, "apply", "-f", str(bad))
    assert result.returncode == 1
    line = _line_of(text, "max_retries_per_step: many")
    assert f"{bad}:{line}: profiles.strict.safety.max_retries_per_step: " in result.stderr
    assert "nothing was sent" in result.stderr
    assert export_text(policy_server, tmp_path / "after.yaml") == before

    # Valid on its own, but names a profile that exists nowhere: also refused, with the line.
    text = EXAMPLE.read_text().replace("automation_profile: sandboxed-dev",
                                       "automation_profile: nowhere")
    bad.write_text(text)
    result = toolgate_cli(policy_server, "apply", "-f", str(bad))
    assert result.returncode == 1
    line = _line_of(text, "automation_profile: nowhere")
    assert (f"{bad}:{line}: projects.research.automation_profile: profile 'nowhere' is "
            "neither in this file nor on the service") in result.stderr
    assert export_text(policy_server, tmp_path / "after.yaml") == before


def test_dry_run_shows_the_diff_and_changes_nothing(policy_server: Server,
                                                     tmp_path: Path) -> None:
    toolgate_cli(policy_server, "apply", "-f", str(EXAMPLE))
    before = export_text(policy_server, tmp_path / "before.yaml")
    changed = tmp_path / "changed.yaml"
    changed.write_text(EXAMPLE.read_text().replace("max_retries_per_step: 2",
                                                   "max_retries_per_step: 4"))
    dry = toolgate_cli(policy_server, "apply", "-f", str(changed), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "~ profile strict\n    safety.max_retries_per_step: 2 -> 4\n" in dry.stdout
    assert "Plan: 0 to create, 1 to update, 0 to delete" in dry.stdout
    assert export_text(policy_server, tmp_path / "after.yaml") == before

    real = toolgate_cli(policy_server, "apply", "-f", str(changed))
    assert real.returncode == 0 and "Applied 1 change(s)." in real.stdout
    back = toolgate_cli(policy_server, "apply", "-f", str(EXAMPLE))
    assert "safety.max_retries_per_step: 4 -> 2" in back.stdout


def test_prune_deletes_what_the_file_no_longer_names(start_server: Callable[[], Server],
                                                      tmp_path: Path) -> None:
    server = start_server()  # its own: pruning must not touch the other tests' state
    assert toolgate_cli(server, "apply", "-f", str(EXAMPLE)).returncode == 0
    text = EXAMPLE.read_text()
    smaller = text.split("  web.search:\n")[0] + "\n" + "skills: {}\n"
    smaller = smaller.replace("  sandboxed-dev:\n", "  unused-dev:\n")  # rename: +1, -1
    smaller = smaller.replace("automation_profile: sandboxed-dev", "automation_profile: strict")
    smaller = smaller.replace("  explore:\n", "  explore-2:\n")
    path = tmp_path / "smaller.yaml"
    path.write_text(smaller)

    without = toolgate_cli(server, "apply", "-f", str(path), "--dry-run")
    assert "\n- " not in "\n" + without.stdout
    dry = toolgate_cli(server, "apply", "-f", str(path), "--dry-run", "--prune")
    assert dry.returncode == 0, dry.stderr
    for line in ("+ profile unused-dev", "- profile sandboxed-dev", "- tool web.search",
                 "- skill files", "- skill search", "+ action explore-2"):
        assert f"\n{line}\n" in f"\n{dry.stdout}", line
    with Client(server.url, token=ADMIN_TOKEN) as client:
        listable = _listable(client)
    if listable:
        assert "! action explore: not pruned (no delete route)" in dry.stdout
    else:
        assert "the service cannot list actions" in dry.stderr

    real = toolgate_cli(server, "apply", "-f", str(path), "--prune")
    assert real.returncode == 0, real.stderr
    stdout = real.stdout
    # Deletes come last: the profile goes after the project that named it was pointed away.
    assert stdout.index("~ project research") < stdout.index("- profile sandboxed-dev")
    with Client(server.url, token=ADMIN_TOKEN) as client:
        with pytest.raises(ToolgateRequestError) as info:
            client.request("GET", "/v1/tools/web.search")
        assert info.value.status == 404
        assert client.request("GET", "/v1/skills")["items"] == []
    again = toolgate_cli(server, "apply", "-f", str(path), "--prune").stdout
    assert again.splitlines()[-1].startswith("No changes (")
    if listable:  # the action it cannot delete is reported again, never silently kept
        assert "! action explore: not pruned (no delete route)" in again


def _listable(client: Client) -> bool:
    try:
        client.request("GET", "/v1/actions")
    except ToolgateRequestError as exc:
        if exc.status in (404, 405):
            return False
        raise
    return True
