"""`pyqueue cluster status`: a cluster's nodes and shards, as its NATS servers hold them."""

import json

import click
from rich.console import Console
from rich.table import Table


@click.group()
def cluster() -> None:
    """A cluster on NATS JetStream (docs/cluster.md)."""


@cluster.command()
@click.option(
    "--cluster", "urls", required=True, metavar="NATS_URLS", help="nats://HOST:PORT, comma-separated."
)
@click.option("--cluster-name", default="pyqueue", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def status(urls: str, cluster_name: str, as_json: bool) -> None:
    """Nodes; each shard's owner, lease, changelog, and every standby's replication lag."""
    from pyqueue.cluster.nats_link import ClusterError
    from pyqueue.cluster.status import cluster_status

    try:
        found = cluster_status(tuple(u.strip() for u in urls.split(",") if u.strip()), cluster_name)
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(found.to_dict(), indent=2))
        return
    if not found.shards:
        raise click.ClickException(f"no cluster named {cluster_name!r} on these NATS servers")
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
            f"{s.changelog_end} entries, {s.changelog_bytes / 1e6:.1f} MB",
            ", ".join(f"{b.node} ({b.lag})" for b in s.standbys) or "none",
        )
    console = Console()
    console.print(nodes)
    console.print(shards)
