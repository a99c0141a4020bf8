"""Every CLI option's default is the one its config holds: written once (pyqueue/defaults.py and
the config dataclasses), never retyped in an option where it could drift."""

from typing import Any

import click

from pyqueue import defaults
from pyqueue.cli.main import main
from pyqueue.engine.limits import Limits
from pyqueue.engine.retry import RetryPolicy
from pyqueue.server.config import ServerConfig
from pyqueue.server.http_limits import HttpLimits
from pyqueue.worker.runtime import WorkerConfig

server, limits, retry, http, worker = ServerConfig(), Limits(), RetryPolicy(), HttpLimits(), WorkerConfig()

SERVE: dict[str, Any] = {
    "data_dir": defaults.DATA_DIR,
    "listen": defaults.ADDRESS,
    "http_listen": defaults.HTTP_LISTEN,
    "commit_mode": server.commit_mode,
    "heartbeat_s": server.heartbeat_s,
    "worker_timeout_s": server.worker_timeout_s,
    "summary_every": server.summary_s,
    "min_free_bytes": server.min_free_bytes,
    "max_payload_bytes": limits.max_payload_bytes,
    "max_jobs_per_enqueue": limits.max_jobs_per_enqueue,
    "max_workflow_jobs": limits.max_workflow_jobs,
    "max_name_length": limits.max_name_length,
    "max_prefetch": limits.max_prefetch,
    "max_streams": limits.max_streams,
    "max_streams_per_connection": limits.max_streams_per_connection,
    "max_stream_bytes": limits.max_stream_bytes,
    "max_http_body_bytes": http.max_body_bytes,
    "http_read_timeout": http.read_timeout_s,
    "max_retries": retry.max_retries,
    "backoff": (retry.base_s, retry.exponent, retry.jitter_s),
    "max_worker_losses": retry.max_worker_losses,
    "max_unknown_handbacks": retry.max_unknown_handbacks,
    "keep_completed": retry.keep_completed_ms / 1000,
    "keep_dead": retry.keep_dead_ms / 1000,
    "read_share": server.read_share,
}
WORKER: dict[str, Any] = {"grace": worker.grace_s, "pool": worker.pool, "summary_every": worker.summary_s}


def _defaults(command: click.Command) -> dict[str, Any]:
    return {p.name: p.default for p in command.params if p.name is not None}


def test_serve_and_worker_options_default_to_their_configs() -> None:
    commands = main.commands
    for command, expected in ((commands["serve"], SERVE), (commands["worker"], WORKER)):
        given = _defaults(command)
        wrong = {name: (given.get(name), want) for name, want in expected.items() if given.get(name) != want}
        assert wrong == {}, f"{command.name}: (option default, config default): {wrong}"


def test_the_shared_defaults_are_the_ones_clients_and_commands_use() -> None:
    from pyqueue.client.client import DEFAULT_ADDRESS, DEFAULT_PRIORITY
    from pyqueue.engine.limits import DEFAULT_PRIORITY as ENGINE_PRIORITY

    assert DEFAULT_ADDRESS == defaults.ADDRESS == _defaults(main)["address"]
    assert (
        DEFAULT_PRIORITY
        == ENGINE_PRIORITY
        == defaults.PRIORITY
        == _defaults(main.commands["enqueue"])["priority"]
    )
    for name in ("check", "repair", "restore"):
        assert _defaults(main.commands[name])["data_dir"] == defaults.DATA_DIR
