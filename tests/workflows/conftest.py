import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ServerProcess

import pyqueue

sys.path.insert(0, str(Path(__file__).parent))

import flow_app


@pytest.fixture
def sharded(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    yield server
    server.close()


@pytest.fixture
def flows(sharded: ServerProcess, tmp_path: Path) -> Iterator[pyqueue.App]:
    flow_app.app.address = sharded.address
    flow_app.LOG = tmp_path / "ran.log"
    flow_app.LOG.touch()
    flow_app.BROKEN.add("bad.jpg")
    yield flow_app.app
    flow_app.app.close()
