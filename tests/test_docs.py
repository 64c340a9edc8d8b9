"""Docs that are generated from data stay true."""

import re
import subprocess
from pathlib import Path

from app.policy.denies import markdown_table

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_deny_code_table_matches_the_code():
    text = (DOCS / "deny-codes.md").read_text()
    table = text.split("<!-- deny-table:start -->")[1].split("<!-- deny-table:end -->")[0]
    assert table.strip() == markdown_table().strip(), (
        "docs/deny-codes.md is stale: paste app.policy.denies.markdown_table()")


def test_every_setting_is_documented():
    from app.config import Settings

    text = (DOCS / "configuration.md").read_text()
    missing = [name for name in Settings.model_fields
               if f"`TOOLGATE_{name.upper()}`" not in text]
    assert not missing, f"docs/configuration.md lacks {missing}"


def test_the_pages_table_of_views_lists_each_view_once():
    """docs/ui.md printed its table of views twice, the second copy older (issue 45 item
    9): each view is one row."""
    text = (DOCS / "ui.md").read_text()
    table = text[text.index("| view | permission | what it shows |"):].split("\n\n", 1)[0]
    views = [row.split("|")[1].strip() for row in table.splitlines()[2:]]
    assert views and len(views) == len(set(views)), views


def test_key_files_the_docs_write_are_never_committed():
    """docs/approvals.md writes agent.key and approver.key where it is followed, often a
    clone of this repository (issue 45 item 8): every `*.key` a page writes is git-ignored."""
    written = sorted({name for page in DOCS.glob("*.md")
                      for name in re.findall(r">\s*([\w./-]+\.key)\b", page.read_text())})
    assert written, "no page writes a key file any more: drop this test"
    checked = subprocess.run(["git", "check-ignore", "--no-index", *written],
                             cwd=DOCS.parent, capture_output=True, text=True)
    assert sorted(checked.stdout.split()) == written, checked


# Modules a documented Python block may use; each block that uses one imports it itself.
_MODULES = ("asyncio", "json", "os", "sys", "time", "subprocess", "pathlib", "httpx", "orjson",
            "uuid")


def test_every_python_block_imports_the_modules_it_uses():
    """A reader copies one block: docs/frameworks.md's Claude Agent SDK block called
    asyncio.run without `import asyncio`, working only after another block of the page
    (issue 45 item 7)."""
    pages = [*sorted(DOCS.glob("*.md")), DOCS.parent / "README.md",
             DOCS.parent / "clients" / "python" / "README.md"]
    missing = []
    for page in pages:
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.S):
            for module in _MODULES:
                if re.search(rf"(?<![\w.]){module}\.", block) and not re.search(
                        rf"^\s*(import .*\b{module}\b|from {module}\b)", block, re.M):
                    missing.append(f"{page.name}: {module} in {block.splitlines()[0]!r}")
    assert not missing, missing


def test_no_page_hides_a_step_that_makes_a_file():
    """A `doc-test: setup:` comment runs for the doc test but is invisible to a reader: a
    file it makes (registry.md's data/safety_test.jsonl) is a step the reader must see
    (issue 45 item 7). Hidden setup may only prepare what the reader already has."""
    hidden = [f"{page.name}: {marker}" for page in DOCS.glob("*.md")
              for marker in re.findall(r"<!-- doc-test: setup: (.*?) -->", page.read_text())
              if re.search(r"mkdir|>|\btouch\b|\bcp\b", marker)]
    assert not hidden, hidden
