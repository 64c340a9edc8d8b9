"""gateway.yaml is validated like a policy file (SPEC §14): every problem with its line,
unknown keys refused, a non-loopback HTTP listener without a token refused; and the
mapping from MCP annotations to a capability (pure)."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.gateway import mapping
from app.gateway.config import PolicyFileError, ServerConfig, load_config
from tests.serving import TOOLGATE

GOOD = textwrap.dedent("""\
    version: 1
    toolgate: {url: http://127.0.0.1:8000, token_env: TOOLGATE_TOKEN}
    listen: {stdio: true}
    plan: {action: explore}
    approvals: {wait_seconds: 0}
    servers:
      fs:
        command: [mcp-server-filesystem, /srv/work]
        trust_annotations: false
        sandbox: {id: fs-work, root: /srv/work}
        tools:
          write_file: {path_args: [path], estimated_cost: 0, cost: 0, step_id: writes}
    """)


def problems(text: str) -> list[str]:
    with pytest.raises(PolicyFileError) as caught:
        load_config(text, "gw.yaml")
    return str(caught.value).splitlines()


def test_the_specs_example_is_valid() -> None:
    config = load_config(GOOD)
    assert config.deadline("fs") == 60
    assert config.servers["fs"].tools["write_file"].path_args == ["path"]


def test_every_problem_is_named_with_its_line() -> None:
    text = GOOD.replace("trust_annotations: false", "trust_annotations: yes\n    colour: blue")
    text = text.replace("cost: 0, step_id", "cost: -1, step_id")
    assert problems(text) == [
        "gw.yaml:9: servers.fs.trust_annotations: Input should be a valid boolean "
        "(write true or false: 'yes' is a string in YAML 1.2)",
        "gw.yaml:10: servers.fs.colour: unknown field",
        "gw.yaml:13: servers.fs.tools.write_file.cost: Input should be greater than or "
        "equal to 0",
    ]


def test_unknown_sections_and_duplicate_keys_are_refused() -> None:
    assert problems(GOOD + "listner: {}\n") == [
        "gw.yaml:13: listner: unknown field (sections: version, toolgate, listen, plan, "
        "approvals, deadline_seconds, servers)"]
    assert "duplicate key (first at line 3)" in problems(
        GOOD.replace("plan: {action: explore}", "listen: {stdio: true}"))[0]


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "gateway.example.com", "::"])
def test_a_non_loopback_http_listener_needs_a_token(host: str) -> None:
    text = GOOD.replace("listen: {stdio: true}",
                        f"listen: {{http: {{host: '{host}', port: 8787}}}}")
    assert problems(text) == [
        f"gw.yaml:3: listen.http: an HTTP listener on {host!r} (not loopback) needs "
        "token_env or oauth: every request must carry a bearer token"]
    load_config(text.replace("port: 8787", "port: 8787, token_env: GATEWAY_TOKEN"))
    oauth = "oauth: {issuer: 'https://idp.example', audience: 'https://gw.example/mcp'}"
    load_config(text.replace("port: 8787", f"port: 8787, {oauth}"))
    assert problems(text.replace("port: 8787", f"port: 8787, token_env: T, {oauth}")) == [
        "gw.yaml:3: listen.http: token_env or oauth, not both: one way to check a caller"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_a_loopback_http_listener_may_go_without(host: str) -> None:
    load_config(GOOD.replace("listen: {stdio: true}",
                             f"listen: {{http: {{host: '{host}', port: 8787}}}}"))


@pytest.mark.parametrize("replace, message", [
    ("    command: [mcp-server-filesystem, /srv/work]\n", "exactly one of command"),
    ("plan: {action: explore}", "exactly one of action"),
    ("listen: {stdio: true}", "exactly one listener"),
])
def test_exactly_one_of(replace: str, message: str) -> None:
    text = GOOD.replace(replace, {"plan: {action: explore}": "plan: {}",
                                  "listen: {stdio: true}": "listen: {stdio: false}"}
                        .get(replace, ""))
    assert message in "\n".join(problems(text))


def test_a_server_name_cannot_hold_the_separator() -> None:
    assert "invalid name 'my.fs'" in problems(GOOD.replace("  fs:", "  my.fs:"))[0]


def test_check_validates_without_starting(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text(GOOD + "extra: 1\n")
    ok = subprocess.run([TOOLGATE, "gateway", "check", "-c", str(good)],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and "ok (stdio; servers: fs)" in ok.stdout
    refused = subprocess.run([TOOLGATE, "gateway", "check", "-c", str(bad)],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert f"{bad}:13: extra: unknown field" in refused.stderr


def _server(**fields: object) -> ServerConfig:
    return ServerConfig(command=["x"], **fields)


def test_an_untrusted_server_is_the_worst_case_whatever_it_says() -> None:
    claim = mapping.claim(_server(), "read", {"readOnlyHint": True, "destructiveHint": False})
    assert claim.capability == {"writes": True, "checkpointable": False, "unsafe": True}
    assert claim.safety_category == "destructive"


@pytest.mark.parametrize("hints, writes, category", [
    ({"readOnlyHint": True}, False, "safe"),
    ({"readOnlyHint": False, "destructiveHint": False}, True, "safe"),
    ({"readOnlyHint": False, "destructiveHint": True}, True, "destructive"),
    ({}, True, "destructive"),  # the protocol's defaults: not read-only, destructive
    (None, True, "destructive"),
])
def test_a_trusted_servers_annotations(hints, writes, category) -> None:
    claim = mapping.claim(_server(trust_annotations=True), "t", hints)
    assert claim.capability == {"writes": writes, "checkpointable": False, "unsafe": False}
    assert claim.safety_category == category


def test_the_tools_entry_says_unsafe_and_checkpointable() -> None:
    server = _server(trust_annotations=True,
                     tools={"t": {"unsafe": True, "checkpointable": True}})
    assert mapping.claim(server, "t", {"readOnlyHint": True}).capability == {
        "writes": False, "checkpointable": True, "unsafe": True}


def test_the_authorize_body_carries_what_the_entry_sets_and_nothing_else() -> None:
    server = _server(sandbox={"id": "fs", "root": "/w"},
                     tools={"w": {"path_args": ["path"], "step_id": "s", "estimated_cost": 2}})
    claim = mapping.claim(server, "w", None)
    body = mapping.authorize_body(plan_id="p", name="fs.w", server=server, tool="w",
                                  args={"path": "/w/a"}, claim_=claim)
    assert body["tool"]["path_args"] == ["path"] and body["tool"]["args"] == {"path": "/w/a"}
    assert body["context"]["step_id"] == "s" and body["context"]["estimated_cost"] == 2
    assert "confirmed" not in body["context"]  # never set on the gateway's own
    plain = mapping.authorize_body(plan_id="p", name="fs.r", server=server, tool="r",
                                   args={}, claim_=None)
    assert "capability" not in plain["tool"] and "step_id" not in plain["context"]


def test_the_servers_home_is_what_call_rules_resolve_tilde_against() -> None:
    """sandbox.home is sent as context.variables.HOME (SPEC §18: `~/...` patterns resolve
    against it; without it they match every path of the call)."""
    server = _server(sandbox={"root": "/w", "home": "/home/dev"})
    body = mapping.authorize_body(plan_id="p", name="fs.r", server=server, tool="r",
                                  args={}, claim_=None)
    assert body["context"]["variables"] == {"HOME": "/home/dev"}
    bare = mapping.authorize_body(plan_id="p", name="fs.r", server=_server(sandbox={"root": "/w"}),
                                  tool="r", args={}, claim_=None)
    assert "variables" not in bare["context"]
    with pytest.raises(ValidationError):
        _server(sandbox={"root": "/w", "home": "relative/home"})
