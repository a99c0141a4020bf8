"""A real cluster for each test: three NATS servers (shared by the module's tests, each test on a
cluster name of its own) and three pyqueue nodes (cluster_nodes.py)."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cluster_nodes import Cluster
from nats_servers import NatsCluster


@pytest.fixture(scope="module")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    servers = NatsCluster(tmp_path_factory.mktemp("nats")).start()
    yield servers
    servers.stop()


@pytest.fixture
def cluster(tmp_path: Path, nats: NatsCluster) -> Iterator[Cluster]:
    c = Cluster(tmp_path, nats).start()
    yield c
    c.close()
