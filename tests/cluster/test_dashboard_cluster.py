"""A cluster node's dashboard has a Cluster page: the nodes, which shards each owns, where each
shard's owner serves and how far this node's standbys are behind (a real browser, as the other
dashboard tests)."""

import time

from browsers import needs_browser
from cluster_nodes import Cluster

pytestmark = needs_browser


def test_the_cluster_page_shows_nodes_and_owners(cluster: Cluster, browser) -> None:  # type: ignore[no-untyped-def]
    node = cluster.nodes[0]
    browser.get(f"http://{node.http_address}/#/cluster")
    deadline = time.monotonic() + 60
    while True:
        text = browser.find_element("id", "view").text
        if "shards-table" in browser.page_source and all(n.name in text for n in cluster.nodes):
            break
        assert time.monotonic() < deadline, text
        time.sleep(0.2)
    assert browser.find_element("id", "nav-cluster").is_displayed()
    for shard in (0, 1):
        assert cluster.owner_address(shard) in text
    assert f"{node.name} (this node)" in text
