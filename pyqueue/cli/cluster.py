"""`pyqueue cluster`: a cluster's status as its NATS servers hold it, and the operator's moves
(move a shard, drain a node for maintenance, undrain it)."""

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from pyqueue.cluster.nats_link import ClusterConfig, NatsLink

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.group()
def cluster() -> None:
    """A cluster on NATS JetStream (docs/cluster.md)."""


def _nats_options(command: Callable[..., None]) -> Callable[..., None]:
    """How to reach the cluster's NATS servers: the same flags as `pyqueue serve`'s."""
    for option in reversed(
        [
            click.option(
                "--cluster",
                "urls",
                required=True,
                metavar="NATS_URLS",
                help="nats://HOST:PORT, comma-separated.",
            ),
            click.option("--cluster-name", default="pyqueue", show_default=True),
            click.option(
                "--cluster-ca", type=_FILE, default=None, help="PEM CA of the NATS servers' certificates."
            ),
            click.option(
                "--tls-cert", type=_FILE, default=None, help="PEM certificate to show NATS, if it asks."
            ),
            click.option("--tls-key", type=_FILE, default=None, help="PEM private key of --tls-cert."),
        ]
    ):
        command = option(command)
    return command


def _config(
    urls: str, cluster_name: str, cluster_ca: Path | None, tls_cert: Path | None, tls_key: Path | None
) -> "ClusterConfig":
    from pyqueue.cluster.nats_link import ClusterConfig

    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    return ClusterConfig(
        urls=_urls(urls), node="cli", name=cluster_name, ca=cluster_ca, cert=tls_cert, key=tls_key
    )


def _run(nats: dict[str, Any], operation: "Callable[[NatsLink], Awaitable[str]]") -> None:
    from pyqueue.cluster.nats_link import ClusterError, NatsLink

    config = _config(**nats)
    try:
        link = NatsLink(config).start()
        try:
            click.echo(link.call(lambda: operation(link), 600))
        finally:
            link.close()
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None


def _urls(urls: str) -> tuple[str, ...]:
    return tuple(u.strip() for u in urls.split(",") if u.strip())


@cluster.command()
@click.argument("shard", type=int)
@click.argument("node")
@_nats_options
@click.option("--timeout", type=float, default=120.0, show_default=True)
def move(shard: int, node: str, timeout: float, **nats: Any) -> None:
    """Hand SHARD over to NODE: its owner finishes what it holds, then NODE serves it."""
    from pyqueue.cluster import operations

    _run(nats, lambda link: operations.move(link, shard, node, timeout))


@cluster.command()
@click.argument("node")
@_nats_options
@click.option("--timeout", type=float, default=300.0, show_default=True)
def drain(node: str, timeout: float, **nats: Any) -> None:
    """Move every shard away from NODE (for maintenance) and keep it from taking any."""
    from pyqueue.cluster import operations

    _run(nats, lambda link: operations.drain(link, node, timeout))


@cluster.command()
@click.argument("node")
@_nats_options
def undrain(node: str, **nats: Any) -> None:
    """Let a drained NODE take shards again (it takes free ones; `move` brings others)."""
    from pyqueue.cluster import operations

    _run(nats, lambda link: operations.undrain(link, node))


@cluster.command()
@_nats_options
@click.option("--json", "as_json", is_flag=True)
def status(as_json: bool, **nats: Any) -> None:
    """Nodes; each shard's owner, lease, changelog, and every standby's replication lag."""
    from pyqueue.cluster.nats_link import ClusterError
    from pyqueue.cluster.status import cluster_status

    config = _config(**nats)
    try:
        found = cluster_status(config)
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(found.to_dict(), indent=2))
        return
    if not found.shards:
        raise click.ClickException(f"no cluster named {config.name!r} on these NATS servers")
    click.echo(f"cluster {found.name}: {found.shards} shards, {len(found.nodes)} nodes")
    nodes = Table("node", "address")
    for name, address in sorted(found.nodes.items()):
        nodes.add_row(name, address)
    shards = Table("shard", "owner", "lease renewed", "changelog", "standbys (entries behind)")
    for s in found.shard_status:
        shards.add_row(
            str(s.shard),
            f"{s.owner} at {s.address}" if s.owner else "none (a standby takes it)",
            f"{s.lease_renewed_s_ago}s ago" if s.lease_renewed_s_ago is not None else "-",
            f"entries {s.changelog_first} to {s.changelog_end}, {s.changelog_bytes / 1e6:.1f} MB",
            ", ".join(f"{b.node} ({b.lag})" for b in s.standbys) or "none",
        )
    console = Console()
    console.print(nodes)
    console.print(shards)
