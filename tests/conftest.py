import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from browsers import CHROMEDRIVER
from harness import ServerProcess

import pyqueue


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "data")
    proc.start()
    yield proc
    proc.close()


@pytest.fixture
def browser() -> Iterator[object]:
    """Headless Chromium (tests/browsers.py)."""
    assert CHROMEDRIVER is not None, "CI installs chromium and chromium-driver (.ci/run)"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    driver.set_window_size(1280, 1000)  # the screenshots show a page as a laptop does
    yield driver
    driver.quit()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[pyqueue.Client]:
    with pyqueue.Client(server.address, timeout=20) as c:
        yield c


# In CI a durability, keepalive, network or PostgreSQL test that skips (a missing tool, no root)
# proves nothing, so it fails.
_MUST_RUN_IN_CI = (
    "tests/durability/",
    "tests/cluster/",
    "tests/server/test_keepalive.py",
    "tests/server/test_network.py",
    "tests/contrib/test_outbox_postgres.py",
    "tests/contrib/test_django_outbox.py",
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") == "true" and item.nodeid.startswith(_MUST_RUN_IN_CI):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where it must run: {report.longrepr}"
