"""A headless Chromium driven by selenium, for the operators' page's end-to-end tests and
its screenshots (docs/ui.md). Debian's `chromium` and `chromium-driver`: where they are
missing the tests skip, unless TOOLGATE_REQUIRE_BROWSER=1 (CI, .ci/run) makes that a failure.
Nothing is downloaded: selenium is given both paths and told to stay offline."""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE = os.environ.get("TOOLGATE_REQUIRE_BROWSER") == "1"


def chrome(width: int = 1360, height: int = 900):  # type: ignore[no-untyped-def]
    """A new headless Chromium, or a skip (a failure under TOOLGATE_REQUIRE_BROWSER=1)."""
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not binary or not driver:
        message = "chromium and chromedriver are needed (apt-get install chromium chromium-driver)"
        if REQUIRE:
            pytest.fail(f"{message}; TOOLGATE_REQUIRE_BROWSER=1")
        pytest.skip(message)
    os.environ.setdefault("SE_OFFLINE", "true")  # selenium-manager: never download a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--lang=en-US", "--no-first-run",
                "--disable-extensions", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    # The page's own JavaScript errors and CSP violations, read back by the tests.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(driver))
