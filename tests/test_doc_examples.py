"""The docs' commands run, against a served toolgate, as a reader runs them.

`toolgate serve` on the SQLite default, started as `make run` starts it: in an empty folder
(the reader's checkout, with `examples/`), no TOOLGATE_* settings, so it creates
./toolgate.db and writes the first admin key to ./toolgate.admin-key. Only the address is
the test's: the docs' `127.0.0.1:8000` becomes the served one, and TOOLGATE_URL says it to
the CLI. Nothing else is set for the page: each page's "Before you start" takes the key from
the file, in the shell the page's blocks then run in (tests/docrun.py).

Two runs:
- each page on a fresh database, its blocks in the page's order (`test_the_page_runs`);
- every page one after another on one database, as a reader who follows the README and then
  the docs (`test_the_pages_run_one_after_another`): a page that changes or removes what an
  earlier page made (a profile, an action, a project's actions or settings, a rule, a
  webhook, the global config) fails there, naming both pages. Each page has names of its
  own; a page that needs an empty database says so (`<!-- doc-test: fresh-database: WHY -->`,
  and its "Before you start" tells the reader how) and gets one there too.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cli.apply import Service, read_state
from tests import docblocks
from tests.docblocks import Block
from tests.docrun import Reader
from tests.serving import TOOLGATE, serve, stop

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         ROOT / "clients" / "python" / "README.md"]
CLIENT_SRC = ROOT / "clients" / "python" / "src"
FRESH = re.compile(r"^<!-- doc-test: fresh-database: (.+?) -->$", re.MULTILINE)
BEFORE = ('export TOOLGATE_TOKEN=$(cat toolgate.admin-key)\n'
          'auth="Authorization: Bearer $TOOLGATE_TOKEN"\n')


def _runnable(page: Path) -> list[Block]:
    return [b for b in docblocks.blocks(page) if b.runs]


RUNNABLE = [p for p in PAGES if _runnable(p)]


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


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


def test_no_hidden_setup() -> None:
    """What a page needs is a step the reader sees, not a comment that runs."""
    hidden = [b.where for page in PAGES for b in docblocks.blocks(page) if b.setup]
    assert hidden == []


@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_the_page_says_before_you_start(page: Path) -> None:
    """A page's examples start from the same two lines, whatever page came before."""
    first = _runnable(page)[0]
    assert first.text.startswith(BEFORE), f"{first.where} does not start with\n{BEFORE}"
    if page.parent.name == "docs":
        headings = re.findall(r"^## (.+)$", page.read_text(), re.MULTILINE)
        assert headings[:1] == ["Before you start"], (
            f"{_name(page)}: its first section is not 'Before you start'")
        section = page.read_text().split("## Before you start", 1)[1].split("\n## ", 1)[0]
        assert first.text in section, f"{first.where} is not in 'Before you start'"
    if FRESH.search(page.read_text()):
        assert "fresh database" in first_section_text(page), (
            f"{_name(page)} needs a fresh database and does not tell the reader")


def first_section_text(page: Path) -> str:
    text = page.read_text()
    return text.split("\n## ", 2)[1] if "\n## " in text else text


# --- running the pages ----------------------------------------------------------------------

class Checkout:
    """A reader's folder with a `make run` serving from it."""

    def __init__(self, where: Path) -> None:
        self.folder = where / "reader"
        self.folder.mkdir(parents=True)
        (self.folder / "examples").symlink_to(ROOT / "examples")
        home = where / "home"  # what the pages write under ~ stays in the test's folder
        home.mkdir()
        self.scratch = where / "scratch"
        self.proc, self.url = serve({}, where / "server.log", cwd=self.folder)
        self.key = (self.folder / "toolgate.admin-key").read_text().strip()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
        env.pop("auth", None)
        env.update(TOOLGATE_URL=self.url, HOME=str(home),
                   PATH=f"{Path(TOOLGATE).parent}{os.pathsep}{env.get('PATH', '')}",
                   PYTHONPATH=os.pathsep.join([str(CLIENT_SRC), str(ROOT),
                                               env.get("PYTHONPATH", "")]))
        self.env = env

    def follow(self, page: Path) -> None:
        reader = Reader(self.url, self.folder, self.env, self.scratch / page.stem)
        try:
            for block in _runnable(page):
                reader.run(block)
        finally:
            reader.close()

    def footprint(self) -> dict[tuple[str, str], str]:
        """What the pages can make, each thing with its content."""
        service = Service(self.url, self.key)
        try:
            state = read_state(service).sections
            hooks = service.send("GET", "/v1/webhooks")[1]["items"]
        finally:
            service.close()
        found: dict[tuple[str, str], str] = {("config", "global"): _canon(state["config"])}
        projects: dict[str, dict[str, list[str]]] = {}
        for section, items in state.items():
            if section == "config":
                continue
            for name, item in items.items():
                found[(section, name)] = _canon(item)
                project = name if section in ("projects", "settings") else (
                    item.get("project") if isinstance(item, dict) else None)
                if project:
                    projects.setdefault(project, {}).setdefault(section, []).append(name)
        for name, uses in projects.items():
            found[("project", name)] = _canon(uses)
        for hook in hooks:
            found[("webhooks", hook["name"])] = _canon(hook)
        return found

    def close(self) -> None:
        stop(self.proc)


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


@pytest.fixture
def checkout(tmp_path: Path) -> Iterator[Checkout]:
    made = Checkout(tmp_path)
    try:
        yield made
    finally:
        made.close()


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_the_page_runs(page: Path, checkout: Checkout) -> None:
    checkout.follow(page)


@pytest.mark.slow
def test_the_pages_run_one_after_another(tmp_path: Path) -> None:
    shared = Checkout(tmp_path / "shared")
    owner: dict[tuple[str, str], str] = {}
    clashes: list[str] = []
    try:
        before = shared.footprint()
        for page in RUNNABLE:
            if FRESH.search(page.read_text()):
                alone = Checkout(tmp_path / page.stem)
                try:
                    alone.follow(page)
                finally:
                    alone.close()
                continue
            shared.follow(page)
            after = shared.footprint()
            for thing in sorted(set(before) | set(after)):
                if before.get(thing) == after.get(thing):
                    continue
                earlier = owner.get(thing)
                if earlier is not None and earlier != _name(page):
                    what = "removes" if thing not in after else "changes"
                    clashes.append(f"{_name(page)} {what} {thing[0]} '{thing[1]}', "
                                   f"which {earlier} made")
                owner.setdefault(thing, _name(page))
            before = after
    finally:
        shared.close()
    assert clashes == []
