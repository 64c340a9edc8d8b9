"""The shell analysis: bounded, total (never raises), cached by text, thread-safe."""

from __future__ import annotations

import json
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from app.policy.rules import RuleCall, build_ruleset, compile_rule, evaluate_rules, shell
from app.policy.rules.shell import MAX_DEPTH, analyse

RULES = build_ruleset([
    compile_rule("deny", {"tools": ["Bash"], "effect": "deny",
                          "when": {"command": ["rm *"], "paths": [".env", "~/.ssh/**"],
                                   "domains": ["*", "!github.com"]}}),
    compile_rule("ask", {"tools": ["Bash"], "effect": "ask", "when": {"command": ["git *"]}}),
    compile_rule("classify", {"tools": ["Bash"], "effect": "classify",
                              "when": {"command": ["ls:*"], "paths": ["/**"]},
                              "capability": {"unsafe": False}}),
])


def _nested(levels: int) -> str:
    line = "rm x"
    for _ in range(levels):
        line = "bash -c " + json.dumps(line)
    return line


def test_nesting_is_followed_to_its_limit_and_no_further() -> None:
    inside = analyse(_nested(MAX_DEPTH - 1))
    assert inside.unanalysable is None and ("rm", "x") in [c.words for c in inside.commands]
    assert analyse(_nested(MAX_DEPTH + 1)).unanalysable == f"nested deeper than {MAX_DEPTH} levels"
    deep = "echo " + "$(" * 20 + "rm x" + ")" * 20
    assert analyse(deep).unanalysable is not None


def test_lines_that_cannot_be_read_are_not_analysed() -> None:
    assert analyse("ls\x00rm x").unanalysable == "holds a NUL character"
    assert analyse("echo " + "a" * (shell.MAX_LINE_CHARS + 1)).unanalysable == "too long"
    assert analyse("ls && " * 3000 + "ls").unanalysable is not None  # Python's own limit


def test_the_cache_is_bounded_and_answers_the_same() -> None:
    first = analyse("git status --short")
    assert analyse("git status --short") is first
    for i in range(shell.CACHE_SIZE + 10):
        analyse(f"echo {i}")
    assert len(shell._cache) <= shell.CACHE_SIZE
    assert analyse("git status --short") == first


def test_threads_parse_at_once() -> None:
    results: list[tuple[str, ...]] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        for i in range(50):
            words = analyse(f"sudo -u u{n} rm file{n}-{i} | wc -l").commands[0].words
            with lock:
                results.append(words)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 200 and all(w[0] == "rm" for w in results)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab rm-$(){}[]`'\"\\|&;<>*?~=@/.\n\t#!ü")) ,
               max_size=60))
def test_any_text_is_analysed_or_refused_never_an_error(line: str) -> None:
    analysis = analyse(line)
    assert analysis.unanalysable is None or analysis.opaque is not None
    outcome = evaluate_rules(RULES, RuleCall("Bash", {"command": line}, shell_arg="command",
                                            sandbox_root="/repo", home="/home/u"))
    if analysis.unanalysable:
        assert outcome.deny is not None and outcome.classify is None


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c,
                                                                          max_size=3),
                    max_leaves=8))
def test_any_argument_value_is_evaluated_never_an_error(value: object) -> None:
    rules = build_ruleset([
        compile_rule("expr", {"tools": ["*"], "effect": "deny",
                              "when": {"expr": "tool.args.x.size() > 2"}}),
        compile_rule("paths", {"tools": ["*"], "effect": "ask", "when": {"paths": ["*.pem"]}}),
        compile_rule("shell", {"tools": ["*"], "effect": "deny", "when": {"command": ["x"]}}),
    ])
    outcome = evaluate_rules(rules, RuleCall("t", {"x": value, "command": value},
                                             shell_arg="command", path_args=("x",),
                                             url_args=("x",)))
    if not isinstance(value, str):
        assert outcome.deny is not None  # a non-string command cannot be analysed


def test_parsing_has_a_budget_counted_in_work_not_time() -> None:
    assert analyse("a | " * 10_000 + "a").unanalysable == "too costly to parse"
    script = "\n".join(f"cd p{i} && npm test 2>&1 | tee log{i} || echo fail" for i in range(200))
    assert analyse(script).unanalysable is None
    heredoc = "cat > big.py <<'EOF'\n" + "print('x')\n" * 5000 + "EOF"
    assert analyse(heredoc).unanalysable is None
    # the parser is usable after a cancelled parse
    assert analyse("git log -1 --format=%H").commands[0].words == ("git", "log", "-1",
                                                                 "--format=%H")


def test_a_line_of_too_many_words_is_not_analysed() -> None:
    assert analyse("git add " + " ".join(f"f{i}.py" for i in range(1500))).unanalysable is None
    assert analyse("echo " + "w " * 2500).unanalysable == "more than 2000 words"
