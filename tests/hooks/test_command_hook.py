"""`toolgate hook <agent>` never fails open (SPEC §20, issue 42 item 1): against a fake
service (tests/hooks/fake_service.py) it exits 0 only on a well-formed answer, and 2 on
everything else: `{}` or `{"decision": "approve"}` for a PreToolUse, `"allow "`, a deny
with a second `permissionDecision`, extra fields, a 500, a hung or dripping service, a key
file it cannot use. Each run is the real command, as an agent runs it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hooks.fake_service import ANSWERS, FakeService
from tests.serving import TOOLGATE, free_port

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gemini"
PRE = {"session_id": "s-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/work/repo",
       "hook_event_name": "PreToolUse", "tool_name": "Write",
       "tool_input": {"file_path": "/work/repo/a.txt", "content": "a"},
       "tool_use_id": "toolu_01"}
POST = {**PRE, "hook_event_name": "PostToolUse", "tool_response": {"success": True}}
GEMINI_BEFORE = json.loads((FIXTURES / "before_write_file.json").read_text())
GEMINI_AFTER = json.loads((FIXTURES / "after_write_file.json").read_text())
MALFORMED = [case for case in ANSWERS if case not in ("allow", "ask", "done", "deny")]


@pytest.fixture(scope="module")
def service() -> Iterator[FakeService]:
    with FakeService() as fake:
        yield fake


def hook(agent: str, url: str, body: dict | bytes, *args: str, timeout: float = 120,
         **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    stdin = body if isinstance(body, bytes) else json.dumps(body).encode()
    return subprocess.run([TOOLGATE, "hook", agent, "--url", url, "--action", "coding",
                           *args], input=stdin, capture_output=True, timeout=timeout,
                          env={**clean, "TOOLGATE_TOKEN": "tg_test", **env})


def test_a_well_formed_allow_exits_0_and_prints_only_the_decision(service):
    done = hook("claude-code", f"{service.url}/allow", PRE)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow",
        "permissionDecisionReason": "allowed by toolgate [decision d-1]"}}
    asked = hook("claude-code", f"{service.url}/ask", PRE)
    assert asked.returncode == 0
    assert json.loads(asked.stdout)["hookSpecificOutput"]["permissionDecision"] == "ask"
    after = hook("claude-code", f"{service.url}/done", POST)
    assert (after.returncode, json.loads(after.stdout)) == (0, {})


def test_a_deny_exits_2_with_its_reason_on_stderr(service):
    done = hook("claude-code", f"{service.url}/deny", PRE)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (2, b"", b"why")


@pytest.mark.parametrize("case", MALFORMED)
def test_anything_but_a_well_formed_answer_blocks(service, case):
    done = hook("claude-code", f"{service.url}/{case}", PRE)
    assert done.returncode == 2, (case, done.stdout, done.stderr)
    assert done.stdout == b""
    assert b"blocked" in done.stderr or case == "deny-then-allow"


def test_an_allow_is_no_answer_to_a_post_tool_use(service):
    """After the call only `{}` is an answer: a PreToolUse's allow there is malformed."""
    done = hook("claude-code", f"{service.url}/allow", POST)
    assert done.returncode == 2


@pytest.mark.parametrize("case", ["empty-object", "approve", "allow-space", "deny-then-allow",
                                  "allow-updated-input", "hang"])
def test_gemini_cli_blocks_on_the_same_answers_and_prints_a_deny(service, case):
    """Gemini CLI reads stdout's JSON even on exit code 2: a block prints a deny."""
    done = hook("gemini-cli", f"{service.url}/{case}", GEMINI_BEFORE, "--deadline", "2")
    assert done.returncode == 2, done.stderr
    assert json.loads(done.stdout)["decision"] == "deny"


def test_gemini_cli_well_formed_answers(service):
    allowed = hook("gemini-cli", f"{service.url}/allow", GEMINI_BEFORE)
    assert (allowed.returncode, json.loads(allowed.stdout)) == (
        0, {"decision": "allow", "reason": "allowed by toolgate [decision d-1]"})
    after = hook("gemini-cli", f"{service.url}/done", GEMINI_AFTER)
    assert (after.returncode, json.loads(after.stdout)) == (0, {})


def test_a_gemini_body_with_a_key_twice_is_blocked(service):
    """Which `command` would Gemini CLI run? Not guessed: the body is refused."""
    raw = json.dumps(GEMINI_BEFORE).replace('"content": "# notes\\n"',
                                            '"content": "x", "content": "y"').encode()
    assert raw.count(b'"content"') == 2
    done = hook("gemini-cli", f"{service.url}/allow", raw)
    assert done.returncode == 2


@pytest.mark.parametrize("case", ["hang", "drip", "headers-then-hang"])
def test_a_hung_or_dripping_service_blocks_within_the_deadline(service, case):
    """A deadline of 2 s: the drip would take minutes to finish its allow, the hang
    forever; the hook exits 2 well before the bound (generous: a loaded machine)."""
    started = time.monotonic()
    done = hook("claude-code", f"{service.url}/{case}", PRE, "--deadline", "2")
    assert done.returncode == 2, done.stderr
    assert b"deadline" in done.stderr, done.stderr
    assert time.monotonic() - started < 15


def test_the_deadline_comes_from_the_environment_too(service):
    started = time.monotonic()
    done = hook("claude-code", f"{service.url}/hang", PRE, TOOLGATE_HOOK_DEADLINE="1")
    assert done.returncode == 2 and b"deadline of 1 s" in done.stderr
    assert time.monotonic() - started < 15


def test_no_service_blocks(service):
    done = hook("claude-code", f"http://127.0.0.1:{free_port()}", PRE)
    assert done.returncode == 2 and b"cannot reach" in done.stderr
    done = hook("claude-code", "not a url", PRE)
    assert done.returncode == 2 and b"ToolgateUnavailableError" in done.stderr


# --- the key from a file (issue 42 item 3) -----------------------------------------------


def test_the_key_file_is_sent_as_the_key(service, tmp_path):
    key = tmp_path / "toolgate.key"
    key.write_text("tg_from_file\n")
    key.chmod(0o600)
    before = len(service.seen)
    done = hook("gemini-cli", f"{service.url}/allow", GEMINI_BEFORE, "--key-file", str(key))
    assert done.returncode == 0, done.stderr
    [request] = service.seen[before:]
    assert request["headers"]["Authorization"] == "Bearer tg_from_file"
    assert "agent=gemini-cli" in request["path"]
    # The same from the environment, and it wins over TOOLGATE_TOKEN.
    before = len(service.seen)
    done = hook("claude-code", f"{service.url}/allow", PRE, TOOLGATE_KEY_FILE=str(key))
    assert done.returncode == 0, done.stderr
    assert service.seen[before]["headers"]["Authorization"] == "Bearer tg_from_file"


@pytest.mark.parametrize(("setup", "said"), [
    ("missing", b"cannot read the key file"),
    ("others-can-read", b"chmod 600"),
    ("empty", b"does not hold one key"),
    ("directory", b"not a regular file"),
])
def test_a_key_file_it_cannot_use_blocks_and_says_why(service, tmp_path, setup, said):
    key = tmp_path / "toolgate.key"
    if setup == "others-can-read":
        key.write_text("tg_x\n")
        key.chmod(0o644)
    elif setup == "empty":
        key.write_text("\n")
        key.chmod(0o600)
    elif setup == "directory":
        key.mkdir(mode=0o700)
    before = len(service.seen)
    done = hook("claude-code", f"{service.url}/allow", PRE, "--key-file", str(key))
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert len(service.seen) == before  # nothing was asked without the key


@pytest.mark.parametrize("plans", [[], ["--action", "coding", "--plan-id", "p-1"]])
def test_without_exactly_one_plan_flag_the_hook_names_its_flags(service, plans):
    """Issue 45 item 12: the command blocks naming its own flags (and variables), not the
    HTTP route's ?plan_id= / ?action= parameters."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    done = subprocess.run([TOOLGATE, "hook", "claude-code", "--url", service.url, *plans],
                          input=json.dumps(PRE).encode(), capture_output=True, timeout=120,
                          env={**clean, "TOOLGATE_TOKEN": "tg_test"})
    assert done.returncode == 2, done
    assert b"--action NAME" in done.stderr and b"--plan-id ID" in done.stderr, done.stderr
    assert b"?plan_id=" not in done.stderr and b"?action=" not in done.stderr
