import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ServerProcess

import pyqueue

sys.path.insert(0, str(Path(__file__).parent))

import sample_app


@pytest.fixture
def app(server: ServerProcess, tmp_path: Path) -> Iterator[pyqueue.App]:
    """The sample app, pointed at a fresh server, recording to this test's log file."""
    sample_app.app.address = server.address
    sample_app.LOG = tmp_path / "ran.log"
    yield sample_app.app
    sample_app.app.close()
