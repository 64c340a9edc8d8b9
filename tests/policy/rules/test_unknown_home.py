"""With HOME unknown, a deny rule's `~/...` pattern matches the paths that would match it
under some home (any directory of the path), and no other: a secret under any home is
still denied, an ordinary file is not (before, every path of the call was denied)."""

from __future__ import annotations

import pytest

from app.policy.rules import RuleCall, build_ruleset, compile_rule, evaluate_rules

RULES = build_ruleset([
    compile_rule("deny-ssh", {"tools": ["*"], "effect": "deny",
                              "when": {"paths": ["~/.ssh/**", "~/.kube/config"]}}),
    compile_rule("classify-home", {"tools": ["Read"], "effect": "classify",
                                   "when": {"paths": ["~/notes/**"]},
                                   "capability": {"unsafe": False}}),
])


def _read(path: str, home: str | None = None):
    return evaluate_rules(RULES, RuleCall(tool_name="Read", args={"file_path": path},
                                          path_args=("file_path",), sandbox_root="/w",
                                          home=home))


@pytest.mark.parametrize("path", ["/root/.ssh/id_rsa", "/home/dev/.ssh/id_ed25519",
                                  "/.ssh/k", "/w/sub/.ssh/config", "/srv/u/.kube/config",
                                  "~/.ssh/id_rsa"])
def test_a_secret_under_any_home_is_denied(path: str) -> None:
    outcome = _read(path)
    assert outcome.deny is not None and outcome.deny.rule_id == "deny-ssh"


@pytest.mark.parametrize("path", ["/w/README.md", "/w/src/ssh.py", "/etc/kube/config.d/x",
                                  "/home/dev/.sshx/k"])
def test_an_ordinary_file_is_not(path: str) -> None:
    assert _read(path).deny is None


def test_a_known_home_is_exact() -> None:
    assert _read("/w/sub/.ssh/config", home="/home/dev").deny is None
    assert _read("/home/dev/.ssh/k", home="/home/dev").deny is not None


def test_classify_stays_certain_with_home_unknown() -> None:
    assert _read("/home/dev/notes/a.md").classify is None
    assert _read("/home/dev/notes/a.md", home="/home/dev").classify is not None
