"""The operators' page end to end (SPEC §13): a headless Chromium (tests/ui/browser.py)
against a real `toolgate serve`, on SQLite and on Postgres. It signs in, sees the decisions
a test agent just made, filters them by code, opens one and reads its checks, grants a
pending approval and sees the agent's retry allowed, and shows an agent key its "not
allowed" page (tests/ui/scenario.py)."""

from __future__ import annotations

import pytest

from tests.serving import serve, stop
from tests.ui.browser import chrome

pytestmark = pytest.mark.slow


@pytest.fixture
def browser():
    driver = chrome()
    try:
        yield driver
    finally:
        driver.quit()


def test_the_operators_page_in_a_browser(browser, database_url, tmp_path):
    from tests.ui.scenario import ADMIN_TOKEN, setup, walk

    proc, url = serve({"TOOLGATE_DATABASE_URL": database_url,
                       "TOOLGATE_ADMIN_TOKEN": ADMIN_TOKEN}, tmp_path / "serve.log")
    try:
        walk(browser, setup(url), shot=lambda name: None)
    finally:
        stop(proc)
