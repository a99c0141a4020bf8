"""`pyqueue check` (verify a stopped server's data directory, read-only) and `pyqueue repair`
(salvage a damaged one: an explicit, separate step)."""

from pathlib import Path

import click

from pyqueue import defaults

_DATA_DIR = click.option(
    "--data-dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=defaults.DATA_DIR,
    show_default=True,
)


def _stores(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("shard-*")) if (data_dir / "cluster.json").exists() else [data_dir]


@click.command()
@_DATA_DIR
def check(data_dir: Path) -> None:
    """Check a stopped server's store: records, indexes, counts and the in-memory sets rebuilt from
    them. Opens read-only: it never creates or changes anything."""
    from pyqueue.engine.check import check as run_check
    from pyqueue.store import RocksStore, StoreDamagedError

    ok = True
    for path in _stores(data_dir):
        try:
            store = RocksStore(path, read_only=True)
        except StoreDamagedError as exc:
            click.echo(f"problem: {exc}", err=True)
            ok = False
            continue
        lost = store.lost_commits()
        if lost:
            click.echo(f"problem: {lost}", err=True)
            ok = False
        try:
            report = run_check(store)
        except Exception as exc:  # a corrupt block, read while checking
            click.echo(f"problem: {path}: reading the store failed: {exc}", err=True)
            ok = False
            continue
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


@click.command()
@_DATA_DIR
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def repair(data_dir: Path, yes: bool) -> None:
    """Salvage a store whose write-ahead log is damaged (the server stopped): every log record that
    can be read is kept, the corrupt ones are dropped for good (jobs may be lost), and the result is
    written to table files. Back the directory up first; run `pyqueue check` after."""
    from pyqueue.store import RocksStore, StoreDamagedError
    from pyqueue.store.durable_mark import read_mark, write_mark
    from pyqueue.store.wal_salvage import salvage_logs

    if not yes:
        click.confirm(f"repair {data_dir}? Unreadable records are dropped for good", abort=True)
    for path in _stores(data_dir):
        for line in salvage_logs(path):
            click.echo(f"{path}: {line}")
        try:
            store = RocksStore(path, salvage=True)
        except StoreDamagedError as exc:
            raise click.ClickException(f"{exc}; repair cannot help here: restore from a backup") from None
        store.flush()
        latest, mark = store.latest_sequence(), read_mark(path)
        store.close()
        if mark is not None and latest < mark:
            click.echo(f"{path}: the commits after sequence {latest} (up to {mark}) are lost for good")
        write_mark(path, latest)  # what is left is what the server serves from now on
        click.echo(f"{path}: salvaged")
    click.echo("now run: pyqueue check --data-dir " + str(data_dir))
