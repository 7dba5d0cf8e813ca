"""Debian's Chromium through its ChromeDriver (Selenium), for the pages in
tests/server/test_browser.py and the HTML mails in
tests/server/test_mail_look.py; skipped where they are absent.  The fixtures
are offered to tests/server by its conftest.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
#: the widths the screenshots and the narrow-screen checks use
WIDTHS = (1280, 375)


@pytest.fixture(scope="session")
def _chromium():
    """One headless Chromium for the session (each start costs seconds of CPU)."""
    if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
        pytest.skip("Chromium and its driver are absent (install them with .ci/chromium-install)")
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--hide-scrollbars"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(_chromium):
    """The session's Chromium as a fresh one is: a blank page at 1280 x 900, no
    cookies or stored data left by an earlier test."""
    _chromium.get("about:blank")
    _chromium.delete_all_cookies()
    _chromium.set_window_size(1280, 900)
    yield _chromium
    _chromium.get("about:blank")  # leave no page of this test's server open
    _chromium.delete_all_cookies()


@pytest.fixture
def screenshots(tmp_path) -> Path:
    """Where a test's screenshots go: PBM_SCREENSHOTS (docs/web.md shows a
    set) or the test's own directory."""
    return Path(os.environ.get("PBM_SCREENSHOTS") or tmp_path / "screenshots")
