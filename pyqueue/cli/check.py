"""`pyqueue check`: verify a stopped server's data directory."""

from pathlib import Path

import click


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default="./pyqueue-data",
    show_default=True,
)
def check(data_dir: Path) -> None:
    """Check a stopped server's store: records, indexes and the in-memory sets rebuilt from them."""
    from pyqueue.engine.check import check as run_check
    from pyqueue.store import RocksStore

    stores = sorted(data_dir.glob("shard-*")) if (data_dir / "cluster.json").exists() else [data_dir]
    ok = True
    for path in stores:
        try:
            store = RocksStore(path)
        except Exception as exc:
            raise click.ClickException(
                f"cannot open {path} (is a server still running on it?): {exc}"
            ) from None
        try:
            report = run_check(store)
        finally:
            store.close()
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(report.by_status.items())) or "none"
        click.echo(f"{path}: {report.jobs} jobs ({statuses})")
        for problem in report.problems:
            click.echo(f"problem: {path}: {problem}", err=True)
        ok = ok and report.ok
    if not ok:
        raise SystemExit(1)
    click.echo("ok: every record, index entry and rebuilt set agrees")
