"""A reader following one page of the docs: its blocks in the page's order, in one shell.

What a block sets (a shell variable, an export, a function, the current folder) is there
for the page's later blocks, as in the terminal of a reader who runs them one after another:
the shell's state is saved after each block and restored before the next. The page's
`python` blocks run in one interpreter of their own, in one namespace, each at its place in
the page, with the environment the shell has exported by then (the reader starts python from
that shell). Nothing carries over from one page to the next: each page sets up what it uses
itself ("Before you start").
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import docblocks
from tests.docblocks import Block

SEP = "@@doc-test-step@@"
TIMEOUT = 300
SHELL_PREAMBLE = 'curl() { command curl --silent --show-error --fail-with-body "$@"; }\n'
# Saves what the block left: variables (not bash's own, not read-only ones), functions, the
# folder and the exported environment (for the python blocks). A console block runs curl as
# the reader's shell does; a sh/bash block's curl fails on an HTTP error status.
SAVE = textwrap.dedent(r'''
    __tg_save() {
      local __n
      for __n in $(compgen -v); do
        case "$__n" in
          BASH*|COMP*|DIRSTACK|EPOCH*|EUID|FUNCNAME|GROUPS|HIST*|HOSTNAME|HOSTTYPE|IFS) ;;
          LINENO|MACHTYPE|OLDPWD|OPT*|OSTYPE|PIPESTATUS|PPID|PS1|PS2|PS4|PWD|RANDOM) ;;
          SECONDS|SHELLOPTS|SHLVL|SRANDOM|UID|_|__n|__tg_*) ;;
          *) [[ ${!__n@a} == *r* ]] || declare -p "$__n" ;;
        esac
      done > "$__tg_state" 2>/dev/null
      unset -f curl  # the test's wrapper (sh blocks only) is not the reader's
      declare -f >> "$__tg_state" || true
      printf '%s' "$PWD" > "$__tg_state.pwd"
      env -0 > "$__tg_state.env"
    }
''')
PYTHON_SERVER = textwrap.dedent('''
    import json, os, sys, traceback
    status, sys.stdout = sys.stdout, sys.stderr  # the blocks print to the log
    namespace = {"__name__": "__main__"}
    for line in sys.stdin:
        block = json.loads(line)
        os.environ.clear()
        os.environ.update(block["env"])
        os.chdir(block["cwd"])
        try:
            exec(compile(block["text"], block["where"], "exec"), namespace)
            ok = True
        except BaseException:
            traceback.print_exc()
            ok = False
        sys.stderr.flush()
        status.write(("ok" if ok else "failed") + "\\n")
        status.flush()
''')


class Reader:
    """One page's reader: `run(block)` for each block in the page's order, then `close()`."""

    def __init__(self, url: str, folder: Path, env: dict[str, str], scratch: Path) -> None:
        self.url, self.folder, self.env = url, folder, env
        scratch.mkdir(parents=True, exist_ok=True)
        self.state = scratch / "shell-state.sh"
        self.state.write_text("")
        self.pwd = str(folder)
        self.exported = dict(env)
        self.python_log = scratch / "python.log"
        self.python: subprocess.Popen[str] | None = None

    # --- shell -------------------------------------------------------------------------

    def _script(self, body: str, *, strict: bool) -> str:
        head = (f"__tg_state={_quote(str(self.state))}\n{SAVE}"
                f'source "$__tg_state" >/dev/null 2>&1 || true\n'
                f"cd {_quote(self.pwd)}\n")
        if strict:  # sh/bash: every command must succeed, curl's too
            head += SHELL_PREAMBLE + "set -euo pipefail\n"
        return head + body + "\n__tg_save\n"

    def _bash(self, script: str) -> subprocess.CompletedProcess[str]:
        """bash in a session of its own: on a timeout, whatever it started is ended too."""
        with subprocess.Popen(["bash", "-c", script], cwd=self.folder, env=self.env,
                              text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True) as proc:
            try:
                out, err = proc.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
                pytest.fail(f"timed out after {TIMEOUT} s:\n{script}\n{out}\n{err}")
        self._load_state()
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def _load_state(self) -> None:
        pwd = Path(f"{self.state}.pwd")
        if pwd.exists():
            self.pwd = pwd.read_text()
        env = Path(f"{self.state}.env")
        if env.exists():
            self.exported = dict(item.split("=", 1) for item in
                                 env.read_text().split("\0") if "=" in item)

    def _shell(self, block: Block) -> None:
        result = self._bash(self._script(docblocks.served(block.text, self.url), strict=True))
        assert result.returncode == 0, (
            f"{block.where} failed ({result.returncode}):\n{block.text}\n--- stdout\n"
            f"{result.stdout}\n--- stderr\n{result.stderr}")
        if block.expect_json is not None:
            actual = docblocks.last_json(result.stdout)
            expected = json.loads(block.expect_json)
            assert docblocks.json_matches(expected, actual), (
                f"{block.where}: the answer shown after the block is not what it prints:\n"
                f"{json.dumps(actual, indent=1)}")

    def _console(self, block: Block) -> None:
        steps = docblocks.console_steps(docblocks.served(block.text, self.url))
        body = "exec 2>&1\n" + f"printf '\\n{SEP}\\n'\n"
        for command, _ in steps:  # `$?` after the separator is still the command's
            body += (f"{command}\n__tg_rc=$?\nprintf '\\n{SEP}\\n'\n"
                     "(exit $__tg_rc)\n")
        result = self._bash(self._script(body, strict=False))
        outputs = result.stdout.split(f"\n{SEP}\n")[1:]
        assert len(outputs) == len(steps) + 1, f"{block.where}: stopped early:\n{result.stdout}"
        for (command, expected), actual in zip(steps, outputs, strict=False):
            assert docblocks.matches(expected, actual), (
                f"{block.where}: `{command}` printed\n{actual}\ninstead of\n{expected}")

    # --- python ------------------------------------------------------------------------

    def _python(self, block: Block) -> None:
        if self.python is None:
            self.python = subprocess.Popen(
                [sys.executable, "-c", PYTHON_SERVER], cwd=self.folder, env=self.env,
                text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=open(self.python_log, "a"), start_new_session=True)  # noqa: SIM115
        assert self.python.stdin is not None and self.python.stdout is not None
        start = self.python_log.stat().st_size
        self.python.stdin.write(json.dumps({
            "where": block.where, "text": docblocks.served(block.text, self.url),
            "env": self.exported, "cwd": self.pwd}) + "\n")
        self.python.stdin.flush()
        deadline = time.monotonic() + TIMEOUT
        ready: list[object] = []
        while not ready and time.monotonic() < deadline and self.python.poll() is None:
            ready = select.select([self.python.stdout], [], [], 1)[0]
        status = self.python.stdout.readline().strip() if ready else "no answer"
        with open(self.python_log) as log:
            log.seek(start)
            printed = log.read()
        assert status == "ok", f"{block.where} failed ({status}):\n{block.text}\n{printed}"

    # ------------------------------------------------------------------------------------

    def run(self, block: Block) -> None:
        if block.lang in ("sh", "bash"):
            self._shell(block)
        elif block.lang == "console":
            self._console(block)
        elif block.lang == "python":
            self._python(block)

    def close(self) -> None:
        if self.python is not None:
            if self.python.stdin is not None:
                self.python.stdin.close()
            try:
                self.python.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.python.pid, signal.SIGKILL)
                self.python.wait()
            self.python = None


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
