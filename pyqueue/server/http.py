"""The server's HTTP port: /metrics for Prometheus, /healthz for load balancers, the web
dashboard at / with its JSON API under /api/ (dashboard.py), and jobs over HTTP/JSON under /v1/
(http_api.py: enqueue and look up with curl).

A small threaded WSGI server (the standard library's) beside the gRPC server, in the process that
owns the public address: the server itself, or a sharded server's supervisor. Its handlers run on
their own threads and ask the event loop for what they serve, so a slow scrape never holds up the
gRPC side, and the gRPC side never waits on HTTP.

With tokens on (--auth-file), every path but /healthz and the static page needs
`Authorization: Bearer TOKEN`: /metrics the read right on every queue, the dashboard's API the
rights of what it does (the gRPC server behind it checks them). Served over TLS when the gRPC port
is.
"""

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from pyqueue.engine.errors import EngineError
from pyqueue.server.auth import Authority, Principal
from pyqueue.server.config import TlsFiles
from pyqueue.server.dashboard import Dashboard
from pyqueue.server.http_answers import StartResponse, answer, error_answer
from pyqueue.server.http_api import JobsApi
from pyqueue.server.http_clients import TokenClients
from pyqueue.server.http_limits import HttpLimits
from pyqueue.server.http_origin import HostRule
from pyqueue.server.metrics import CONTENT_TYPE
from pyqueue.server.read_share import ReadShare

log = logging.getLogger("pyqueue.http")

SCRAPE_TIMEOUT_S = 10.0
HEALTH_TIMEOUT_S = 5.0  # past the shards' own check (router.HEALTH_CHECK_S): the loop is stuck

Metadata = tuple[tuple[str, str], ...]


class _Server(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most `slots` at once: one more is closed as it comes, so a flood
    of slow clients holds a bounded number of threads and descriptors."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the listen backlog: socketserver's 5 left a flood's clients in SYN retries
    slots = threading.BoundedSemaphore(64)  # set per server in HttpEndpoint.start

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class _Quiet(WSGIRequestHandler):
    timeout = 30.0  # seconds a connection may sit silent (set in HttpEndpoint.start)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # an access line per scrape would drown the server's own log


class HttpEndpoint:
    def __init__(
        self,
        listen: str,
        loop: asyncio.AbstractEventLoop,
        metrics: Callable[[Metadata], Coroutine[Any, Any, bytes]],
        unhealthy: Callable[[], Coroutine[Any, Any, str]],
        public_address: Callable[[], str],
        authority: Authority | None = None,
        tls: TlsFiles | None = None,
        limits: HttpLimits | None = None,
        hosts: HostRule | None = None,
        cluster: Callable[[], dict[str, Any]] | None = None,
        reads: ReadShare | None = None,
    ) -> None:
        """`public_address`: where the dashboard's client reaches the gRPC service (in plaintext
        on loopback: the internal address of a TLS server). `metrics` gets the caller's token;
        `unhealthy` says why the server does not serve ('' when it does), for /healthz; `cluster`,
        a cluster node's view of the cluster, for the dashboard; `reads`, the server's share of
        the loop for reads (read_share.py), which the dashboard's pages keep to as well."""
        self.listen = listen
        self.authority = authority
        self.tls = tls
        self.clients = TokenClients(public_address)
        self.dashboard = Dashboard(self.clients, cluster)
        self.limits = limits or HttpLimits()
        self.jobs = JobsApi(self.clients, self.limits)
        self.loop = loop
        self.metrics = metrics
        self.unhealthy = unhealthy
        self.hosts = hosts or HostRule([listen.rpartition(":")[0]])
        self.reads = reads or ReadShare()
        self.address = ""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Listen, and serve on a thread; returns the bound address (HOST:PORT)."""
        host, _, port = self.listen.rpartition(":")
        limits = self.limits
        server_class: type[_Server] = type(
            "_BoundedServer", (_Server,), {"slots": threading.BoundedSemaphore(limits.max_connections)}
        )
        handler_class: type[_Quiet] = type("_TimedHandler", (_Quiet,), {"timeout": limits.read_timeout_s})
        try:
            self._server = make_server(
                host, int(port), self.app, server_class=server_class, handler_class=handler_class
            )
        except OSError as exc:
            raise SystemExit(
                f"pyqueue serve: cannot listen for HTTP on {self.listen} ({exc.strerror}): give "
                "--http-listen another HOST:PORT, or --http-listen '' to turn the HTTP port off"
            ) from None
        if self.tls is not None:
            # The handshake happens on the request's thread, not in the accept loop.
            self._server.socket = self.tls.ssl_context().wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        self.address = f"{host}:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="pyqueue-http", daemon=True)
        self._thread.start()
        log.info("http listening on %s (dashboard at /, /metrics, /healthz)", self.address)
        return self.address

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.clients.close()

    def _principal(self, environ: dict[str, Any]) -> tuple[Principal | None, Metadata]:
        """The caller, by its Authorization header (raises Unauthenticated); None: tokens are off."""
        header = environ.get("HTTP_AUTHORIZATION")
        metadata: Metadata = (("authorization", header),) if header else ()
        if self.authority is None:
            return None, metadata
        return self.authority.authenticate(metadata), metadata

    def app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path == "/healthz":
            return self._open(path, environ, start_response)
        refusal = self._foreign(environ)
        if refusal:
            return error_answer(start_response, "403 Forbidden", refusal, "PERMISSION_DENIED")
        if path in ("/", "/index.html"):
            return self._open(path, environ, start_response)
        try:
            who, metadata = self._principal(environ)
            if path == "/metrics" and who is not None:
                who.require_everywhere("read", "the server's metrics span")
        except EngineError as exc:
            status = "401 Unauthorized" if exc.code == "UNAUTHENTICATED" else "403 Forbidden"
            challenge = [("WWW-Authenticate", "Bearer")]
            if path.startswith(("/api/", "/v1/")):  # JSON APIs: the documented {"error", "code"}
                return error_answer(start_response, status, str(exc), exc.code, challenge)
            return answer(start_response, status, f"{exc}\n".encode(), extra=challenge)
        # Tokens off: a header is not passed on (nor does it make a client of its own).
        authorization = str(metadata[0][1]) if metadata and who is not None else None
        if path.startswith("/api/"):
            # The interpreter time this thread spent building the page, not its wall time:
            # the page's own gRPC reads wait their turns (and pause) on the loop already.
            started = time.thread_time()
            answered = self.dashboard.app(environ, start_response, authorization)
            if environ.get("REQUEST_METHOD") == "GET":  # a page's read: its share, as gRPC reads
                time.sleep(self.reads.pause_for(time.thread_time() - started))
            return answered
        if path.startswith("/v1/"):
            return self.jobs.app(environ, start_response, authorization)
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return answer(start_response, "405 Method Not Allowed", b"only GET\n")
        if path == "/metrics":
            try:
                body: bytes = asyncio.run_coroutine_threadsafe(self.metrics(metadata), self.loop).result(
                    SCRAPE_TIMEOUT_S
                )
            except Exception as exc:  # a shard that does not answer: say so, never hang the scraper
                log.warning("a metrics scrape failed: %s", exc)
                return answer(
                    start_response, "503 Service Unavailable", f"metrics unavailable: {exc}\n".encode()
                )
            return answer(start_response, "200 OK", body, CONTENT_TYPE)
        return answer(start_response, "404 Not Found", b"not found: try /, /metrics or /healthz\n")

    def _foreign(self, environ: dict[str, Any]) -> str:
        """Why a request that may come from another site's page is refused ('' if it is not)."""
        host = environ.get("HTTP_HOST")
        if host is not None and not self.hosts.allows(host):
            return (
                f"Host {host[:100]!r} is not a name of this server (a page of another site whose name "
                "points here, say): use its address, or start it with --http-allow-host NAME"
            )
        origin = environ.get("HTTP_ORIGIN", "")
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD") and self.hosts.cross_site(origin):
            return f"a change from a page of another site (Origin {origin[:100]!r}) is refused"
        return ""

    def _open(self, path: str, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """What needs no token: the static page (its API calls do) and the health check."""
        if path != "/healthz":
            return self.dashboard.app(environ, start_response, None)
        try:
            why = asyncio.run_coroutine_threadsafe(self.unhealthy(), self.loop).result(HEALTH_TIMEOUT_S)
        except Exception as exc:
            why = f"the server did not answer its health check ({exc!r})"
        if not why:
            return answer(start_response, "200 OK", b"ok\n")
        return answer(start_response, "503 Service Unavailable", f"not serving: {why}\n".encode())
