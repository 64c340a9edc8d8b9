"""Docs that are generated from data stay true."""

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
