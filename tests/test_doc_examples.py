"""The docs' commands run, against a served toolgate (tests/docblocks.py says which and how).

One `toolgate serve` on the SQLite default serves every page, started as `make run` starts
it: in an empty folder, no TOOLGATE_* settings, so it creates ./toolgate.db and writes the
first admin key to ./toolgate.admin-key. The README's blocks run first, then each page's, in
the order of PAGES, on that one server and in that folder, as a reader who follows the
README and then the docs one after another would: a page's example that collides with an
earlier page's (a plan id taken, a prune refused) fails here. `examples/` is there, and
TOOLGATE_URL, TOOLGATE_TOKEN (the admin key) and `auth` (its header) are set.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import docblocks
from tests.docblocks import Block
from tests.serving import TOOLGATE, serve, stop

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         ROOT / "clients" / "python" / "README.md"]
CLIENT_SRC = ROOT / "clients" / "python" / "src"
SEP = "@@doc-test-step@@"
SHELL_PREAMBLE = 'curl() { command curl --silent --show-error --fail-with-body "$@"; }\n'
PYTHON_RUNNER = textwrap.dedent('''
    import json, sys, traceback
    namespace = {"__name__": "__main__"}
    for block in json.load(open(sys.argv[1])):
        try:
            exec(compile(block["text"], block["where"], "exec"), namespace)
        except BaseException:
            traceback.print_exc()
            print("failed in the block at " + block["where"], file=sys.stderr)
            sys.exit(1)
''')


def _runnable(page: Path) -> list[Block]:
    return [b for b in docblocks.blocks(page) if b.runs]


# --- the extractor itself -------------------------------------------------------------------

def test_extractor_reads_fences_markers_and_expected_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n```sh\ncurl -s localhost:8000/x\n```\n```json\n{\"a\": \"b...\"}\n```\n"
        "<!-- doc-test: skip: needs a GPU -->\n```bash\nnvidia-smi\n```\n"
        "<!-- doc-test: setup: touch x -->\n```console\n$ echo 'a\nb' \\\n  c\na\nb c\n"
        "# a comment\n$ true\n```\n```yaml\nk: v\n```\n")
    found = docblocks.blocks(page)
    assert [(b.lang, b.line, b.runs) for b in found] == [
        ("sh", 2, True), ("json", 5, False), ("bash", 9, False), ("console", 13, True),
        ("yaml", 22, False)]
    assert found[0].expect_json == '{"a": "b..."}\n' and found[2].skip == "needs a GPU"
    assert found[3].setup == ["touch x"]
    assert docblocks.console_steps(found[3].text) == [("echo 'a\nb' \\\n  c", "a\nb c"),
                                                      ("true", "")]
    assert docblocks.served(found[0].text, "http://127.0.0.1:5") == "curl -s 127.0.0.1:5/x\n"


def test_wildcards() -> None:
    assert docblocks.matches("created key key_... (agent)", "created key key_ab12 (agent)")
    assert not docblocks.matches("created key (agent)", "created key (admin)")
    assert docblocks.json_matches({"id": "01...", "n": 1, "m": "..."},
                                  {"id": "01abc", "n": 1, "m": {"x": 1}})
    assert not docblocks.json_matches({"id": "01..."}, {"id": "02", "extra": 1})
    assert not docblocks.json_matches({"n": 1}, {"n": True})
    assert docblocks.last_json('{"a": 1}{"b": [2]}\n') == {"b": [2]}


def test_every_skipped_block_says_why() -> None:
    skipped = [b for page in PAGES for b in docblocks.blocks(page)
               if b.lang in docblocks.RUN and b.skip is not None]
    assert all(len(b.skip) > 10 for b in skipped), [b.where for b in skipped]
    # Illustrations are the exception: a new one should be a runnable example instead.
    # 11: the gateway's and the coding agents' pages need an MCP client or Claude Code.
    assert len(skipped) <= 11, [f"{b.where}: {b.skip}" for b in skipped]


# --- the pages, run -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def instance(tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[str, Path, dict[str, str]]]:
    tmp_path = tmp_path_factory.mktemp("docs")
    folder = tmp_path / "reader"
    folder.mkdir()
    (folder / "examples").symlink_to(ROOT / "examples")
    home = tmp_path / "home"  # what the pages write under ~ stays in the test's folder
    home.mkdir()
    proc, url = serve({}, tmp_path / "server.log", cwd=folder)
    try:
        key = (folder / "toolgate.admin-key").read_text().strip()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
        env.update(TOOLGATE_URL=url, TOOLGATE_TOKEN=key, auth=f"Authorization: Bearer {key}",
                   HOME=str(home),
                   PATH=f"{Path(TOOLGATE).parent}{os.pathsep}{env.get('PATH', '')}",
                   PYTHONPATH=os.pathsep.join([str(CLIENT_SRC), str(ROOT),
                                               env.get("PYTHONPATH", "")]))
        yield url, folder, env
    finally:
        stop(proc)


def _bash(script: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """bash in a session of its own: on a timeout, whatever it started is ended too."""
    with subprocess.Popen(["bash", "-c", script], cwd=folder, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"timed out after 300 s:\n{script}\n{out}\n{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _run_shell(block: Block, url: str, folder: Path, env: dict[str, str]) -> None:
    script = "set -euo pipefail\n" + SHELL_PREAMBLE + "".join(
        f"{line}\n" for line in block.setup) + docblocks.served(block.text, url)
    result = _bash(script, folder, env)
    assert result.returncode == 0, (
        f"{block.where} failed ({result.returncode}):\n{block.text}\n--- stdout\n"
        f"{result.stdout}\n--- stderr\n{result.stderr}")
    if block.expect_json is not None:
        actual = docblocks.last_json(result.stdout)
        expected = json.loads(block.expect_json)
        assert docblocks.json_matches(expected, actual), (
            f"{block.where}: the answer shown after the block is not what it prints:\n"
            f"{json.dumps(actual, indent=1)}")


def _run_console(block: Block, url: str, folder: Path, env: dict[str, str]) -> None:
    steps = docblocks.console_steps(docblocks.served(block.text, url))
    script = "exec 2>&1\n" + "".join(f"{line}\n" for line in block.setup)
    script += f"printf '\\n{SEP}\\n'\n"
    for command, _ in steps:
        script += f"{command}\nprintf '\\n{SEP}\\n'\n"
    result = _bash(script, folder, env)
    outputs = result.stdout.split(f"\n{SEP}\n")[1:]
    assert len(outputs) == len(steps) + 1, f"{block.where}: stopped early:\n{result.stdout}"
    for (command, expected), actual in zip(steps, outputs, strict=False):
        assert docblocks.matches(expected, actual), (
            f"{block.where}: `{command}` printed\n{actual}\ninstead of\n{expected}")


def _run_python(blocks: list[Block], url: str, folder: Path, env: dict[str, str]) -> None:
    if not blocks:
        return
    spec = folder.parent / "python-blocks.json"
    spec.write_text(json.dumps([{"where": b.where, "text": docblocks.served(b.text, url)}
                                for b in blocks]))
    result = subprocess.run([sys.executable, "-c", PYTHON_RUNNER, str(spec)], cwd=folder,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if _runnable(p)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_runs(page: Path, instance: tuple[str, Path, dict[str, str]]) -> None:
    url, folder, env = instance
    blocks = _runnable(page)
    for block in blocks:
        if block.lang in ("sh", "bash"):
            _run_shell(block, url, folder, env)
        elif block.lang == "console":
            _run_console(block, url, folder, env)
    _run_python([b for b in blocks if b.lang == "python"], url, folder, env)
