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
    while True:  # the page fills in, and the Cluster link shows once the first page answered
        text = browser.find_element("id", "view").text
        shown = browser.find_element("id", "nav-cluster").is_displayed()
        owners = [cluster.owner_address(shard) for shard in (0, 1)]
        if shown and all(n.name in text for n in cluster.nodes) and all(a in text for a in owners):
            break
        assert time.monotonic() < deadline, (shown, owners, text)
        time.sleep(0.2)
    assert f"{node.name} (this node)" in text
