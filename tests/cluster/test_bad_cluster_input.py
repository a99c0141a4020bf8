"""Bad cluster input is refused at start with a message that says what to change, never a hang."""

from pathlib import Path

from cluster_nodes import Cluster
from harness import pyqueue_command
from nats_servers import free_ports


def serve(data_dir: Path, *args: str) -> str:
    done = pyqueue_command(
        "serve",
        "--data-dir",
        str(data_dir),
        "--listen",
        "127.0.0.1:0",
        "--http-listen",
        "",
        *args,
        timeout=90,
    )
    assert done.returncode != 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_a_node_with_another_shard_count_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    out = serve(tmp_path / "d", "--shards", "3", "--cluster", cluster.nats.urls, "--node", "d",
                "--cluster-name", cluster.name)  # fmt: skip
    assert "has 2 shards; start this node with --shards 2" in out


def test_a_second_node_with_a_running_nodes_name_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    out = serve(tmp_path / "a2", "--shards", "2", "--cluster", cluster.nats.urls, "--node", "a",
                "--cluster-name", cluster.name, "--lease", "2")  # fmt: skip
    assert "another node named 'a' is running" in out
    assert "give each node its own --node" in out


def test_a_nats_url_that_answers_nothing_is_a_clear_error(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    out = serve(tmp_path / "x", "--shards", "2", "--cluster", f"nats://127.0.0.1:{port}", "--node", "x")
    assert f"no NATS server answered at nats://127.0.0.1:{port}" in out
    assert "check --cluster" in out


def test_a_node_name_that_cannot_name_keys_is_refused(tmp_path: Path) -> None:
    out = serve(tmp_path / "x", "--cluster", "nats://127.0.0.1:1", "--node", "a.b")
    assert "--node 'a.b': a node's name is 1 to 64 letters, digits, '-' or '_'" in out


def test_a_cluster_ca_without_a_cluster_is_refused(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read before the flags agree")
    out = serve(tmp_path / "y", "--cluster-ca", str(ca))
    assert "--cluster-ca is for a cluster's nodes: give --cluster too" in out
    assert not (tmp_path / "y").exists(), "nothing was created"
