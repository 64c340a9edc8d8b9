"""The analysis against bash itself: every command bash would run at the top level of a
line (lists, pipelines, groups, here-documents) is one the analysis sees, unless the line
cannot be analysed. A parser that merged two statements, or ended a here-document early,
would hide a command from deny rules; this is how such a misreading is found.

Nothing runs: bash reads the line under a DEBUG trap with `extdebug`, which prints each
simple command and skips it (a skipped command is not expanded, redirected or run; the
trap is set before the line is read, so the line cannot remove it without being skipped).
Lines whose parts run at once (background jobs, pipelines with a here-document) are left
out: their records interleave. Commands inside
substitutions are not compared (bash does not expand a skipped command).
"""

from __future__ import annotations

import random
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from app.policy.rules.shell import analyse
from tests.rulecases import load_rule_cases

BASH = shutil.which("bash")
TRACE = r"""
exec 3>&1 1>/dev/null 2>/dev/null
shopt -s extdebug
set -T
trap '[[ $BASH_COMMAND == "eval \"\$1\"" ]] || { printf "%s\0" "$BASH_COMMAND" >&3; false; }' DEBUG
eval "$1"
"""
KEYWORDS = {"for", "while", "until", "if", "case", "[[", "((", "select", "function", "{",
            "(", "!", "time", "coproc"}
PIECES = ["rm x", "ls", "cat <<'E'\nrm a\nE", "cat <<E\n$(rm b)\nE", "echo `rm c`",
          "echo ` rm d`", "echo 'a;b'", 'echo "x`rm e`"', "(rm f)", "{ rm g; }", "a=1 rm i",
          "bash <<'E'\nrm j\nE", "cat <<-E\n\trm l\n\tE", "rm n #c", "echo 'E'\nrm o",
          "\\\nrm p", "if true; then rm q; fi", "case a in a) rm r;; esac", "echo \\`rm s\\`",
          "cat <<< 'rm t'", "r''m u", '"rm" v', "r\\m w", "$'rm' y", "cat <<\\E\nrm z\nE",
          'cat <<"E"\nx E\nrm aa\nE', "function f { rm ab; }", "rm ad |& cat",
          "[[ -f x ]] && rm ae", "(( 1 )) && rm af", "# it's\nrm ag", "echo 'it''s' && rm ak",
          "echo ${x:-y} ; rm am", "rm ap 2>&1 >/dev/null", ">out rm aq", "<in rm ar"]
SEPARATORS = ["; ", " && ", " || ", " | ", "\n"]


def _lines() -> list[str]:
    lines = [case["call"]["args"].get(case["call"].get("shell_arg") or "", None)
             for _, case in load_rule_cases()]
    rng = random.Random(7)
    for _ in range(200):
        parts = [rng.choice(PIECES) for _ in range(rng.randint(2, 4))]
        lines.append("".join(p + rng.choice(SEPARATORS) for p in parts[:-1]) + parts[-1])
    # Left out: background jobs, and pipelines with a here-document: their parts run at
    # once and their records (several lines long) interleave.
    return [line for line in lines if isinstance(line, str)
            and "&" not in line.replace("&&", "").replace("|&", "").replace(">&", "")
            .replace("&>", "")
            and not ("|" in line and "<<" in line)]


def _bash_names(line: str, workdir: Path) -> list[str]:
    assert BASH is not None
    try:
        done = subprocess.run([BASH, "-c", TRACE, "trace", line], capture_output=True,
                              text=True, timeout=10, cwd=workdir,
                              env={"PATH": str(workdir / "nothing-here")})
    except subprocess.TimeoutExpired:  # `while false; do ...`: every test is skipped
        return []
    names = []
    for command in done.stdout.split("\0"):
        command = command.split("\n", 1)[0] if "<<" in command else command
        if re.match(r"^\w+=\S*[$`]", command):
            continue  # an assignment of a substitution: no command name
        try:
            words = [w for w in shlex.split(command)
                     if not ("=" in w and w.split("=", 1)[0].isidentifier())]
        except ValueError:
            continue
        if words and words[0] not in KEYWORDS:
            names.append(words[0].rsplit("/", 1)[-1])
    return names


@pytest.mark.slow  # about 500 bash processes, ~15 s
@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_every_command_bash_runs_is_seen(tmp_path: Path) -> None:
    # The harness itself reads bash right (so an empty list below means something).
    assert _bash_names("ls; r''m x | cat\nbash <<'E'\nrm y\nE", tmp_path) == [
        "ls", "rm", "cat", "bash"]
    missed = []
    for line in _lines():
        analysis = analyse(line)
        if analysis.unanalysable:
            continue
        ours = {c.words[0].lower() for c in analysis.commands}
        lost = [n for n in _bash_names(line, tmp_path) if n.lower() not in ours]
        if lost:
            missed.append((line, lost))
    assert missed == []
    assert list(tmp_path.iterdir()) == []  # and bash ran nothing (no `>out` was made)
