"""`pyqueue`: the command group and its global options."""

import click

from pyqueue import __version__, defaults
from pyqueue.cli.backup import backup, restore
from pyqueue.cli.batches import batch, batches
from pyqueue.cli.check import check, repair
from pyqueue.cli.cluster import cluster
from pyqueue.cli.cron import cron
from pyqueue.cli.jobs import enqueue, errors, job
from pyqueue.cli.relay import relay
from pyqueue.cli.serve import serve
from pyqueue.cli.steer import cancel, delete, jobs, limit, pause, queues, resume, retry, update
from pyqueue.cli.token import token
from pyqueue.cli.top import top
from pyqueue.cli.worker import worker
from pyqueue.cli.workers import workers


def _version() -> str:
    from pyqueue import __version__, native

    return f"pyqueue {__version__} (native {native.__version__})"


@click.group(context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "PYQUEUE"})
@click.version_option(version=__version__, message=_version())
@click.option(
    "--address",
    envvar="PYQUEUE_ADDRESS",
    default=defaults.ADDRESS,
    show_default=True,
    help="The server to talk to (env PYQUEUE_ADDRESS).",
)
@click.pass_context
def main(ctx: click.Context, address: str) -> None:
    """pyqueue: a durable job queue for Python teams."""
    given = ctx.get_parameter_source("address") != click.core.ParameterSource.DEFAULT
    ctx.obj = {"address": address, "address_given": given}


main.add_command(serve)
main.add_command(cluster)
main.add_command(enqueue)
main.add_command(job)
main.add_command(errors)
main.add_command(check)
main.add_command(repair)
main.add_command(backup)
main.add_command(restore)
main.add_command(worker)
main.add_command(relay)
main.add_command(workers)
main.add_command(top)
main.add_command(cron)
main.add_command(batches)
main.add_command(batch)
main.add_command(token)
for command in (jobs, queues, update, retry, cancel, delete, pause, resume, limit):
    main.add_command(command)
