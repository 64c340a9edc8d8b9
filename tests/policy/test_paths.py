"""Sandbox path containment (app/policy/paths.py, seed 003, SPEC §3 check 10 and §5).

Example tests pin the behaviour on known-hostile inputs; property tests generate hostile
paths and variable values and check the one invariant that matters: whenever check_path
accepts a value, the path a handler would end up using (before and after `$var`
resolution, normalised with backslashes as separators) lies inside the sandbox root.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.policy import paths
from app.policy.checks import check_sandbox_paths
from app.policy.model import Context, Tool
from app.policy.paths import (
    PathEscape,
    check_path,
    find_escape,
    normalise,
    resolve_variables,
    root_refusal,
)

ROOT = "/sandbox"
VARS = {"out": "build/out.txt", "dir": "build", "up": "../..", "abs_in": "/sandbox/x",
        "abs_out": "/etc", "tilde": "~", "ref": "$dir", "bref": "${dir}", "num": 5,
        "nul": "a\x00b", "enc": "%2e%2e", "empty": "", "back": "..\\..\\etc", "none": None}


def accepted(value: object, root: str | None = ROOT, variables: dict | None = None) -> bool:
    try:
        check_path(value, root=root, variables=VARS if variables is None else variables)
    except PathEscape:
        return False
    return True


def reason(value: object, root: str | None = ROOT, variables: dict | None = None) -> str:
    with pytest.raises(PathEscape) as raised:
        check_path(value, root=root, variables=VARS if variables is None else variables)
    return str(raised.value)


# --- examples ----------------------------------------------------------------------------

INSIDE = [
    "out.txt", "a/b/c.txt", "./a", "a/./b", "./", ".", "", "a//b", "a///b//", "a/../b",
    "a/b/../../c", "/sandbox", "/sandbox/", "/sandbox/a/b", "/sandbox/a/../b", "//sandbox/a",
    "/sandbox//a", "a\\b", "a\\..\\b", "\\sandbox\\a", "a/~", "a/~b", "$out", "${out}",
    "$dir/file", "${dir}/file", "pre_${dir}_post", "$abs_in", "${abs_in}/y", "$empty",
    "a/$empty/b", "$1/x", "cost$", "a$/b", "100%", "%41", "a..b", "...", "a/...",
    ".hidden", "a/.b./c", "名前/ファイル", "with space/x y",
]


@pytest.mark.parametrize("value", INSIDE)
def test_inside(value: str) -> None:
    assert accepted(value), reason(value)


OUTSIDE = [
    ("..", "before variable resolution"),
    ("../x", "before variable resolution"),
    ("a/../..", "before variable resolution"),
    ("a/../../sandbox2", "before variable resolution"),
    ("./../x", "before variable resolution"),
    ("a//..//..//x", "before variable resolution"),
    ("/etc/passwd", "before variable resolution"),
    ("/", "before variable resolution"),
    ("//etc", "before variable resolution"),
    ("/sandbox/../etc", "before variable resolution"),
    ("/sandbox2", "before variable resolution"),
    ("/sandboxx/a", "before variable resolution"),
    ("/sand", "before variable resolution"),
    ("..\\x", "before variable resolution"),
    ("a\\..\\..\\x", "before variable resolution"),
    ("\\etc\\passwd", "before variable resolution"),
    ("\\\\server\\share", "before variable resolution"),
    ("$up", "after variable resolution"),
    ("${up}/x", "after variable resolution"),
    ("a/${up}", "after variable resolution"),
    ("$abs_out", "after variable resolution"),
    ("${abs_out}/passwd", "after variable resolution"),
    ("$back", "after variable resolution"),
    ("$dir/../../..", "before variable resolution"),
]


@pytest.mark.parametrize(("value", "stage"), OUTSIDE)
def test_outside(value: str, stage: str) -> None:
    text = reason(value)
    assert "escapes the sandbox root '/sandbox'" in text
    assert stage in text


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("$missing", "variable '$missing' cannot be resolved"),
        ("${missing}/x", "variable '$missing' cannot be resolved"),
        ("$outx", "variable '$outx' cannot be resolved"),  # the longest name is taken
        ("$num", "variable '$num' is not a string"),
        ("$none", "variable '$none' is not a string"),
        ("$ref", "still contains a variable reference"),  # a value holding another $ref
        ("${bref}", "still contains a variable reference"),
        ("${out", "still contains a variable reference"),  # malformed reference
        ("${}", "still contains a variable reference"),
        ("$$out", "still contains a variable reference"),
        ("a\x00b", "control character before"),
        ("a\nb", "control character before"),
        ("a\tb", "control character before"),
        ("a\x7fb", "control character before"),
        ("$nul", "control character after"),
        ("~", "starts with '~' before"),
        ("~/x", "starts with '~' before"),
        ("~root/x", "starts with '~' before"),
        ("$tilde/x", "starts with '~' after"),
        ("%2e%2e/x", "percent-encoded path character before"),
        ("%2E%2E/x", "percent-encoded path character before"),
        ("a%2fb", "percent-encoded path character before"),
        ("a%5c..%5cb", "percent-encoded path character before"),
        ("a%00b", "percent-encoded path character before"),
        ("a%7e", "percent-encoded path character before"),
        ("%24dir", "percent-encoded path character before"),
        ("$enc/x", "percent-encoded path character after"),
    ],
)
def test_ambiguous_values_fail_closed(value: str, fragment: str) -> None:
    assert fragment in reason(value)


def test_variables_resolve_both_syntaxes() -> None:
    assert resolve_variables("$dir/a/${dir}b", {"dir": "x"}) == "x/a/xb"
    assert resolve_variables("no refs here", {}) == "no refs here"
    assert resolve_variables("$1 and $ alone", {}) == "$1 and $ alone"


def test_the_value_is_checked_before_resolution_too() -> None:
    # "$dir/../.." resolves to "build/../.." = "..", but it already escapes unresolved
    # (the "$dir" segment counts as one directory, so two ".." leave the root).
    assert "before variable resolution" in reason("$dir/../..")
    # A value that is fine unresolved and escapes resolved is caught after resolution.
    assert "after variable resolution" in reason("$up")


@pytest.mark.parametrize("value", [5, 1.5, None, True, ["a"], {"a": "b"}, b"a"])
def test_non_string_values(value: object) -> None:
    assert "is not a string" in reason(value)


def test_root_slash_contains_every_absolute_path() -> None:
    for value in ("/etc/passwd", "a/b", "../..", "/../../x", "$up"):
        assert accepted(value, root="/"), value


@pytest.mark.parametrize(
    ("root", "fragment"),
    [
        (None, "sandbox_root is not set"),
        ("", "sandbox_root is not set"),
        ("sandbox", "not an absolute path"),
        ("./sandbox", "not an absolute path"),
        ("~/sandbox", "not an absolute path"),
        ("\\sandbox", "not an absolute path"),
        ("/sand\x00box", "not an absolute path"),
    ],
)
def test_missing_or_relative_root_fails_closed(root: str | None, fragment: str) -> None:
    assert fragment in reason("a.txt", root=root)


# --- issue 22: roots that climb, NFKC and percent-encoded readings ------------------------


@pytest.mark.parametrize(("root", "how"), [
    ("/sandbox/..", "segment"),
    ("/sandbox/../sandbox", "segment"),
    ("/x/../sandbox", "segment"),
    ("/sandbox/a/..", "segment"),
    ("/sandbox\\..", "segment"),
    ("/..", "segment"),
    ("/sandbox/‥", "as NFKC reads it"),
    ("/sandbox/．．", "as NFKC reads it"),
    ("/sandbox／．．", "as NFKC reads it"),
    ("/sandbox/%2e%2e", "once percent-decoded"),
    ("/sandbox%2f%2e%2e", "once percent-decoded"),
    ("/sandbox/%252e%252e", "once percent-decoded"),
    ("/sandbox/％２ｅ％２ｅ", "once percent-decoded"),
    ("/sandbox/%25252525", "percent-encoded this way"),
    ("/sandbox/%c0%ae%c0%ae", "percent-encoded this way"),
])
def test_a_root_that_climbs_is_refused(root: str, how: str) -> None:
    """`/sandbox/..` was quietly normalised to `/`, and then `/etc/passwd` was inside."""
    assert how in root_refusal(root)
    for value in ("/etc/passwd", "a.txt", "."):
        text = reason(value, root=root)
        assert text.startswith("cannot be checked: context.sandbox_root must not ")
        assert how in text


@pytest.mark.parametrize("root", ["/sandbox", "/srv/a..b", "/srv/...", "/srv/..x/y", "/s/%41",
                                  "/s/100%", "/s/ｆｕｌｌ", "/sandbox/.", "/"])
def test_roots_without_a_climb_are_not_refused(root: str) -> None:
    assert root_refusal(root) is None
    assert accepted("a.txt", root=root)


@pytest.mark.parametrize(("value", "fragment"), [
    # The red team's inputs (issue 22): each passed before.
    ("%252e%252e/etc/passwd", "percent-encoded path character before"),
    ("．．／etc/passwd", "escapes the sandbox root '/sandbox' before variable resolution "
                          "(read as NFKC)"),
    ("‥/etc/passwd", "escapes the sandbox root '/sandbox' before variable resolution "
                      "(read as NFKC)"),
    # Around them.
    ("a/‥/‥/x", "(read as NFKC)"),
    ("．．＼．．＼etc", "(read as NFKC)"),
    ("／etc", "(read as NFKC)"),
    ("～/x", "starts with '~' before variable resolution (read as NFKC)"),
    ("％２ｅ％２ｅ/x", "percent-encoded path character before variable resolution "
                     "(read as NFKC)"),
    ("%25252e%25252e/x", "percent-encoded path character before"),  # three rounds
    ("%2525252e/x", "still percent-encoded after 3 rounds of decoding before"),
    ("%ef%bc%8e%ef%bc%8e/x", "percent-encoded path character before"),  # "．．"
    ("%c0%ae%c0%ae/x", "percent-encoded bytes that are not UTF-8 before"),  # overlong "."
    ("%u002e%u002e/x", "holds a %u escape before"),
    ("%25u002e%25u002e/x", "holds a %u escape once percent-decoded before"),
    ("＄up", "escapes the sandbox root '/sandbox' after variable resolution (read as NFKC)"),
    ("＄missing", "variable '$missing' cannot be resolved (read as NFKC)"),
])
def test_encoded_and_compatibility_forms_fail_closed(value: str, fragment: str) -> None:
    assert fragment in reason(value)


def test_variables_are_read_as_nfkc_too() -> None:
    assert "after variable resolution (read as NFKC)" in reason("$x", variables={"x": "‥/‥"})
    assert "percent-encoded path character after" in reason(
        "$x", variables={"x": "%252e%252e"})
    assert accepted("$x/ｆｉｌｅ", variables={"x": "ｒｅｐｏｒｔｓ"})


@pytest.mark.parametrize("value", ["%41", "a%20b", "100%", "%zz", "50%25", "ｆｉｌｅ.txt",
                                   "a‥b", "名前/ファイル", "%e5%90%8d", "/sandbox/ｘ"])
def test_harmless_encodings_and_compatibility_forms_pass(value: str) -> None:
    assert accepted(value), reason(value)


def test_a_root_nfkc_changes_admits_relative_values_only() -> None:
    """The NFKC reading of a value is checked against the root as sent: a handler that
    normalises the value but not the root must not leave it either."""
    root = "/ｓａｎｄｂｏｘ"
    assert accepted("a.txt", root=root) and accepted("ｘ", root=root)
    assert "(read as NFKC)" in reason("/ｓａｎｄｂｏｘ/a.txt", root=root)
    assert "before variable resolution" in reason("/sandbox/a.txt", root=root)


@pytest.mark.parametrize("root", ["/sandbox/", "//sandbox", "/sandbox/.", "/sandbox//",
                                  "/./sandbox/./"])
def test_root_is_normalised(root: str) -> None:
    assert accepted("a.txt", root=root)
    assert accepted("/sandbox/a.txt", root=root)
    assert not accepted("../a.txt", root=root)
    assert "'/sandbox'" in reason("/etc", root=root)


def test_normalise() -> None:
    assert normalise("a//b/./c/..") == "a/b"
    assert normalise("//a") == "/a"
    assert normalise("a\\b\\..\\c") == "a/c"
    assert normalise("") == "."


# --- find_escape and check 10 --------------------------------------------------------------


def test_find_escape_lists_and_missing_arguments() -> None:
    args = {"output": ["a", "b/c", "$out"], "input": "x", "skip": None, "other": "../x"}
    names = ("output", "input", "skip", "absent")
    assert find_escape(args, names, root=ROOT, variables=VARS) is None
    assert find_escape({"output": []}, ("output",), root=ROOT, variables={}) is None

    args["output"] = ["a", "../b", "/etc"]
    name, why = find_escape(args, ("input", "output"), root=ROOT, variables=VARS)
    assert name == "output" and "before variable resolution" in why

    assert find_escape({"output": ["a", 5]}, ("output",), root=ROOT, variables={})[0] == "output"
    assert find_escape({"output": [["a"]]}, ("output",), root=ROOT, variables={})[0] == "output"
    # Only the registered path arguments are looked at.
    assert find_escape({"other": "../x"}, ("output",), root=ROOT, variables={}) is None
    # The first escaping argument in path_args order is reported.
    both = {"a": "../1", "b": "../2"}
    assert find_escape(both, ("b", "a"), root=ROOT, variables={})[0] == "b"


def _tool(args: dict, path_args: tuple[str, ...]) -> Tool:
    return Tool(name="fs.write", writes=True, checkpointable=True, unsafe=False,
                args=args, path_args=path_args, registered=True)


def test_check_sandbox_paths_denies_with_the_argument() -> None:
    ctx = Context(plan_id="p-1", sandbox_root=ROOT, variables={"v": "../../etc"})
    deny = check_sandbox_paths(_tool({"output": "$v/passwd"}, ("output",)), ctx, None)
    assert deny.code == "sandbox_path_escape"
    assert deny.error == "ToolSandboxEscapeError"
    assert deny.check == "sandbox_paths"
    assert deny.details == {"argument": "output"}
    assert deny.message.startswith("Tool 'fs.write' argument 'output' ")
    assert deny.message.endswith("(plan 'p-1')")

    ok = check_sandbox_paths(_tool({"output": "x/y"}, ("output",)), ctx, None)
    assert ok[0] == "pass"
    no_paths = check_sandbox_paths(_tool({"output": "../../x"}, ()), ctx, None)
    assert no_paths[0] == "pass"


def test_check_sandbox_paths_with_a_climbing_root_fails_closed() -> None:
    """The door refuses such a root (422); a Context built any other way still fails."""
    ctx = Context(plan_id="p-1", sandbox_root="/sandbox/..")
    deny = check_sandbox_paths(_tool({"output": "/etc/passwd"}, ("output",)), ctx, None)
    assert deny.code == "sandbox_path_escape" and deny.details == {"argument": "output"}
    assert "context.sandbox_root must not contain a '..' segment" in deny.message


def test_check_sandbox_paths_without_root_fails_closed() -> None:
    deny = check_sandbox_paths(_tool({"output": "x"}, ("output",)), Context(), None)
    assert deny.code == "sandbox_path_escape"
    assert "sandbox_root is not set" in deny.message


# --- properties ---------------------------------------------------------------------------

SEGMENTS = ["..", ".", "", "a", "b", "$v", "${v}", "$w", "${w}", "~", "%2e%2e", "\\..",
            "/", "\\", "$", "${", "}", "$$v", "${undefined}", "sandbox", "..\\..", "x\x00",
            # Readings other than the literal one: NFKC and percent-decoding (issue 22).
            "．．", "‥", "．", "／", "＼", "＄v", "～", "%252e%252e", "％２ｅ％２ｅ", "%41", "%25",
            "%2F", "%ef%bc%8e", "%c0%ae", "%u002e", "ｓａｎｄｂｏｘ"]
ROOTS = ["/", "/sandbox", "/sandbox/", "//sandbox", "/a/b/c", "/srv/sand box", "/sandbox/./x/.",
         "/srv/a..b", "/srv/％41", "/srv/ｓａｎｄｂｏｘ"]
NAMES = ["v", "w", "HOME"]
REFERENCE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")

segment = st.one_of(st.sampled_from(SEGMENTS), st.text(max_size=4))
separator = st.sampled_from(["/", "\\", "", "//"])


@st.composite
def hostile_paths(draw: st.DrawFn) -> str:
    parts = draw(st.lists(segment, max_size=8))
    out = draw(st.sampled_from(["", "/", "\\"]))
    for part in parts:
        out += part + draw(separator)
    return out


# Short, pointed values (another reference, a climb, an absolute path) are drawn often, so
# chains such as v -> "$w" -> "../.." turn up within the example budget.
POINTED = ["$v", "${v}", "$w", "${w}", "$HOME", "${HOME}/..", "$w/../..", "../..", "..", "/etc",
           "/", "~", "a", "", "$", "${", "\\..\\..", "%2e%2e", "a\x00", "‥/‥", "．．／．．",
           "%252e%252e/%252e%252e", "＄w", "$ｗ"]
variable_values = st.one_of(
    st.sampled_from(POINTED), hostile_paths(), st.text(max_size=8), st.integers(), st.none(),
    st.lists(st.text(max_size=2)),
)
values = st.one_of(st.sampled_from(POINTED), hostile_paths())
variables = st.dictionaries(st.sampled_from(NAMES), variable_values, max_size=3)


def contained(root: str, path: str) -> bool:
    """An independent oracle: where a handler joining root and path would end up."""
    root = re.sub("/+", "/", posixpath.normpath(root.replace("\\", "/")))
    joined = posixpath.normpath(posixpath.join(root, path.replace("\\", "/")))
    joined = re.sub("/+", "/", joined)
    return joined == root or joined.startswith(root.rstrip("/") + "/")


def substitute_once(value: str, env: dict) -> str | None:
    """One pass of $name / ${name} substitution; None when a reference cannot be resolved."""
    failed = False

    def one(match: re.Match[str]) -> str:
        nonlocal failed
        replacement = env.get(match.group(1) or match.group(2))
        if not isinstance(replacement, str):
            failed = True
            return ""
        return replacement

    result = REFERENCE.sub(one, value)
    return None if failed else result


PROPERTY = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(root=st.sampled_from(ROOTS), value=values, env=variables)
def test_accepted_paths_stay_inside_before_and_after_resolution(
    root: str, value: str, env: dict
) -> None:
    try:
        check_path(value, root=root, variables=env)
    except PathEscape:
        return
    assert contained(root, value)
    # Resolve the way a handler might, once or repeatedly: every stage stays inside.
    stage = value
    for _ in range(4):
        nxt = substitute_once(stage, env)
        assert nxt is not None, f"accepted {value!r} but {stage!r} cannot be resolved"
        assert contained(root, nxt), f"{value!r} resolves to {nxt!r}, outside {root!r}"
        assert not any(ord(c) < 32 or ord(c) == 127 for c in nxt)
        assert not nxt.startswith("~")
        assert "%2e" not in nxt.lower()
        if nxt == stage:
            break
        stage = nxt
    assert stage == resolve_variables(value, env)


def decoded(text: str) -> str:
    """The oracle's percent-decoding: as a lenient handler would, three times over."""
    for _ in range(3):
        text = unquote(text)
    return unicodedata.normalize("NFKC", text)


@PROPERTY
@given(root=st.sampled_from(ROOTS), value=values, env=variables)
def test_accepted_paths_stay_inside_in_every_reading(root: str, value: str, env: dict) -> None:
    """Whatever a handler does to an accepted value (NFKC-normalises it, percent-decodes it,
    resolves its variables before or after), the path stays inside the root as sent."""
    try:
        check_path(value, root=root, variables=env)
    except PathEscape:
        return
    folded = unicodedata.normalize("NFKC", value)
    stages = [value, folded]
    for start in (value, folded):
        resolved = substitute_once(start, env)
        assert resolved is not None, f"accepted {value!r} but {start!r} cannot be resolved"
        stages += [resolved, unicodedata.normalize("NFKC", resolved)]
    for stage in stages:
        for reading in (stage, decoded(stage)):
            assert contained(root, reading), f"{value!r} reads as {reading!r}, outside {root!r}"
            assert not any(ord(c) < 32 or ord(c) == 127 for c in reading)
            assert not reading.startswith("~")


@PROPERTY
@given(root=st.sampled_from(ROOTS), items=st.lists(values, max_size=4), env=variables)
def test_find_escape_agrees_with_check_path(root: str, items: list[str], env: dict) -> None:
    expected = None
    for value in items:
        try:
            check_path(value, root=root, variables=env)
        except PathEscape as escape:
            expected = ("out", str(escape))
            break
    assert find_escape({"out": items}, ("out",), root=root, variables=env) == expected


@PROPERTY
@given(parts=st.lists(st.sampled_from(["a", "b", ".", "", "c.txt", "$v", "${v}"]), max_size=8),
       root=st.sampled_from(ROOTS))
def test_plain_relative_paths_are_accepted(parts: list[str], root: str) -> None:
    """Liveness: without '..', '~', encodings or bad variables nothing is refused."""
    assert accepted("./" + "/".join(parts), root=root, variables={"v": "sub/dir"})


@PROPERTY
@given(depth=st.integers(min_value=0, max_value=5), extra=st.integers(min_value=1, max_value=3),
       tail=st.sampled_from(["", "x", "y/z", "sandbox2", ".."]))
def test_climbing_above_the_root_is_refused(depth: int, extra: int, tail: str) -> None:
    value = "d/" * depth + "../" * (depth + extra) + tail
    assert not accepted(value, root="/sandbox", variables={})
    assert not accepted("$v", root="/sandbox", variables={"v": value})


ROOT_SEGMENTS = ["..", ".", "", "sandbox", "a..b", "...", "‥", "．．", "．", "／", "＼", "\\",
                 "%2e%2e", "%2E.", "%252e%252e", "％２ｅ％２ｅ", "%2f..", "%41", "%", "ｓｂ"]


@PROPERTY
@given(parts=st.lists(st.one_of(st.sampled_from(ROOT_SEGMENTS), st.text(max_size=3)),
                      min_size=1, max_size=6))
def test_no_root_in_use_climbs_in_any_reading(parts: list[str]) -> None:
    """A root the core uses has no `..` segment as sent, as NFKC reads it, or decoded: so
    normalising it never climbs, and what it names is what it says."""
    root = "/" + "/".join(parts)
    try:
        used = paths.check_root(root)
    except PathEscape as escape:
        assert "context.sandbox_root" in str(escape)
        return
    folded = unicodedata.normalize("NFKC", root)
    for reading in (root, folded, decoded(root), decoded(folded)):
        assert ".." not in re.split(r"[/\\]", reading), reading
    kept = [p for p in re.split(r"/+", root.replace("\\", "/")) if p not in ("", ".")]
    assert used == "/" + "/".join(kept)
