"""Regenerate docs/images/ui-*.png, the operators' page's screenshots in docs/ui.md:

    .venv/bin/python -m tests.ui.screenshots

The same walk as tests/ui/test_page.py (tests/ui/scenario.py), on a fresh SQLite database
served by a real `toolgate serve`, in Debian's headless chromium."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.serving import serve, stop
from tests.ui.browser import chrome
from tests.ui.scenario import ADMIN_TOKEN, setup, walk

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/ui.db",
                           "TOOLGATE_ADMIN_TOKEN": ADMIN_TOKEN}, Path(tmp) / "serve.log")
        driver = chrome(1280, 860)
        try:
            def shot(name: str) -> None:
                path = IMAGES / f"ui-{name}.png"
                driver.save_screenshot(str(path))
                print(path)

            walk(driver, setup(url), shot)
        finally:
            driver.quit()
            stop(proc)


if __name__ == "__main__":
    main()
