"""Regenerate docs/images/ui-*.png, the operators' page's screenshots in docs/ui.md:

    .venv/bin/python -m tests.ui.screenshots

The world of tests/ui/test_page.py (tests/ui/scenario.py), on a fresh SQLite database
served by a real `toolgate serve`, in Debian's headless chromium."""

from __future__ import annotations

import tempfile
from pathlib import Path

from app.log.note import Signer
from tests.serving import serve, stop
from tests.ui.browser import chrome
from tests.ui.scenario import ADMIN_TOKEN, Page, World, setup

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


def tour(page: Page, world: World, shot) -> None:  # type: ignore[no-untyped-def]
    page.sign_in(world.keys["admin"])
    page.find("#chart .uplot")
    shot("overview")
    page.go("decisions")
    page.find("#decision-list")
    shot("decisions")
    page.go(f"decision/{world.held}")
    page.find("#shadow")
    shot("decision")
    page.go("plans")
    page.find("#plan-list")
    shot("plans")
    page.go("audit")
    page.find("#verify").click()
    page.find("#chain-state")
    page.wait.until(lambda d: "verifies" in page.text("#checkpoint"))
    shot("audit")
    page.sign_in(world.keys["approver"])
    page.find("#approval-list")
    shot("approvals")
    page.go(f"approval/{world.approval_id}")
    page.find("#approval-plan")
    shot("approval")
    page.find("#grant").click()
    page.visible("#grant-dialog")
    shot("grant")
    page.go(f"plans?plan_id={world.plan}")
    page.find("#plan-creator")
    shot("plan")
    page.sign_in(world.keys["agent"])
    page.find("#not-allowed")
    shot("not-allowed")


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "log.key"  # signed checkpoints, for the audit view's panel
        key.write_text(Signer.generate("toolgate.ui/log").key() + "\n")
        proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/ui.db",
                           "TOOLGATE_ADMIN_TOKEN": ADMIN_TOKEN,
                           "TOOLGATE_LOG_SIGNING_KEY": str(key),
                           "TOOLGATE_CHECKPOINT_SECONDS": "1"}, Path(tmp) / "serve.log")
        driver = chrome(1280, 860)
        try:
            def shot(name: str) -> None:
                path = IMAGES / f"ui-{name}.png"
                driver.save_screenshot(str(path))
                print(path)

            tour(Page(driver, url), setup(url), shot)
        finally:
            driver.quit()
            stop(proc)


if __name__ == "__main__":
    main()
