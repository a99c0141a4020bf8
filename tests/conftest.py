import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import ServerProcess

import pyqueue


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "data")
    proc.start()
    yield proc
    proc.close()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[pyqueue.Client]:
    with pyqueue.Client(server.address, timeout=20) as c:
        yield c
