"""Every file in examples/ runs, as a user runs it: against `toolgate serve`, with the CLI.

`toolgate apply -f examples/policy.yaml`, then `toolgate test examples/decision-tests.jsonl`
(the decision tests are the tests *of that policy*: they name its registered tools). The
docs' own examples run in tests/test_doc_examples.py.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.serving import TOOLGATE, serve, stop

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TOKEN = "tg_examples_admin_token"
# Each file of examples/ and the test that runs it; a new example needs a test.
RUN_BY = {
    "policy.yaml": "test_the_decision_tests_pass_on_the_example_policy (and tests/policyfile, "
                   "tests/client/test_live_client.py)",
    "decision-tests.jsonl": "test_the_decision_tests_pass_on_the_example_policy",
    "claude-code.yaml": "tests/hooks/test_claude_code.py (applied with `toolgate apply`) "
                        "and tests/hooks/test_route.py",
    "gemini-cli.yaml": "tests/hooks/test_gemini_cli.py (applied with `toolgate apply`) and "
                       "tests/hooks/test_gemini.py",
    **{f"{agent}.yaml": f"tests/agents/{test} (applied with `toolgate apply`) and "
                        "tests/agents/test_payloads.py"
       for agent, test in (("codex", "test_codex.py"), ("qwen-code", "test_qwen_code.py"),
                           ("copilot-cli", "test_copilot_cli.py"))},
}


def test_every_example_is_run_by_a_test() -> None:
    assert sorted(p.name for p in EXAMPLES.iterdir()) == sorted(RUN_BY)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("examples")
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{folder}/toolgate.db",
                       "TOOLGATE_ADMIN_TOKEN": TOKEN}, folder / "server.log")
    try:
        yield url
    finally:
        stop(proc)


def toolgate(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update(TOOLGATE_URL=url, TOOLGATE_TOKEN=TOKEN)
    return subprocess.run([TOOLGATE, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_the_decision_tests_pass_on_the_example_policy(server: str) -> None:
    cases = [orjson.loads(line) for line in
             (EXAMPLES / "decision-tests.jsonl").read_text().splitlines() if line.strip()]
    before = toolgate(server, "test", "examples/decision-tests.jsonl")
    assert before.returncode == 1, before.stdout  # they test the policy: without it, no

    applied = toolgate(server, "apply", "-f", "examples/policy.yaml")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    result = toolgate(server, "test", "examples/decision-tests.jsonl")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == f"{len(cases)} passed, 0 failed"
    # Every registered tool of the policy is tested, allowed and denied.
    tools = {c["request"]["tool"]["name"] for c in cases}
    assert {"fs.read", "fs.write", "shell.exec", "web.search"} <= tools
    assert {c["expect"]["allowed"] for c in cases} == {True, False}
