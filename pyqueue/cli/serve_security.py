"""`pyqueue serve`'s flags for a real network: TLS, client certificates, tokens, the advertised
address, and the refusal to expose an open server by accident."""

import ipaddress
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def security_options(f: F) -> F:
    options = [
        click.option("--tls-cert", type=_FILE, default=None, help="PEM certificate chain: serve TLS only."),
        click.option("--tls-key", type=_FILE, default=None, help="PEM private key of --tls-cert."),
        click.option(
            "--tls-client-ca",
            type=_FILE,
            default=None,
            help="PEM CA: also require client certificates it issued (mTLS).",
        ),
        click.option(
            "--auth-file",
            type=_FILE,
            default=None,
            help="TOML file of tokens and their rights (pyqueue token create); every call then needs a token.",
        ),
        click.option(
            "--advertise",
            default=None,
            help="Host the clients are told to dial (default: the listen host, or this machine's "
            "name when listening on every address).",
        ),
        click.option(
            "--unique-across-queues",
            is_flag=True,
            help="Unique keys hold across every queue (one process only: with --shards above 1 each "
            "shard keeps its own keys, so it is refused). By default a key holds within its queue.",
        ),
        click.option(
            "--unique-per-queue", is_flag=True, hidden=True, help="The default now; kept for old scripts."
        ),
        click.option(
            "--http-allow-host",
            "http_allow_hosts",
            multiple=True,
            help="A name the HTTP port answers to besides its IP addresses, localhost, this machine's "
            "names and --advertise (a proxy's name; repeatable). Other Host headers are refused: DNS "
            "rebinding.",
        ),
        click.option(
            "--insecure",
            is_flag=True,
            help="Allow listening beyond loopback without TLS or without tokens.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def host_of(address: str) -> str:
    host = address.rsplit(":", 1)[0]
    return host[1:-1] if host.startswith("[") else host


def is_loopback(address: str) -> bool:
    host = host_of(address)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve beyond loopback


def check_exposure(listen: str, http_listen: str, tls: bool, auth_file: Path | None, insecure: bool) -> None:
    """Refuse to serve an open port beyond loopback unless asked to (--insecure)."""
    if insecure:
        return
    missing = ([] if tls else ["--tls-cert and --tls-key"]) + ([] if auth_file else ["--auth-file"])
    if missing and not is_loopback(listen):
        raise click.UsageError(
            f"--listen {listen} reaches beyond this machine, and without {' and '.join(missing)} anyone "
            "who reaches it can read, take and delete every job: add them, or --insecure to serve "
            "it open anyway"
        )
    if http_listen and not is_loopback(http_listen) and not (tls and auth_file):
        raise click.UsageError(
            f"--http-listen {http_listen} reaches beyond this machine: the HTTP port needs --auth-file "
            "and TLS (--tls-cert, --tls-key) there, or --insecure to serve it open anyway"
        )


def check_tls_files(cert: Path | None, key: Path | None, client_ca: Path | None) -> None:
    if (cert is None) != (key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if client_ca is not None and cert is None:
        raise click.UsageError("--tls-client-ca needs --tls-cert and --tls-key (mTLS is TLS first)")


def advertised_host(listen: str, advertise: str | None) -> str:
    """The host clients dial: --advertise, else the listen host, else (every address) this machine's name."""
    if advertise:
        return advertise
    host = host_of(listen)
    if host in ("", "0.0.0.0", "::"):
        return socket.getfqdn()
    return host
