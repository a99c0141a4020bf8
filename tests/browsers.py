"""What the dashboard tests need of a real browser (headless Chromium through Selenium; the
`browser` fixture is in conftest.py): CI installs chromium and chromium-driver; elsewhere the tests
that need it are skipped."""

import os
import shutil

import pytest

CHROMEDRIVER = shutil.which("chromedriver")
needs_browser = pytest.mark.skipif(
    CHROMEDRIVER is None and not os.environ.get("CI"), reason="chromium-driver is not installed"
)
