"""The server's HTTP port: /metrics for Prometheus, /healthz for load balancers, and the web
dashboard at / with its JSON API under /api/ (dashboard.py).

A small threaded WSGI server (the standard library's) beside the gRPC server, in the process that
owns the public address: the server itself, or a sharded server's supervisor. Its handlers run on
their own threads and ask the event loop for what they serve, so a slow scrape never holds up the
gRPC side, and the gRPC side never waits on HTTP.
"""

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from pyqueue.server.dashboard import Dashboard
from pyqueue.server.metrics import CONTENT_TYPE

log = logging.getLogger("pyqueue.http")

SCRAPE_TIMEOUT_S = 10.0

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # an access line per scrape would drown the server's own log


class HttpEndpoint:
    def __init__(
        self,
        listen: str,
        loop: asyncio.AbstractEventLoop,
        metrics: Callable[[], Coroutine[Any, Any, bytes]],
        healthy: Callable[[], bool],
        public_address: Callable[[], str],
    ) -> None:
        self.listen = listen
        self.dashboard = Dashboard(public_address)
        self.loop = loop
        self.metrics = metrics
        self.healthy = healthy
        self.address = ""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Listen, and serve on a thread; returns the bound address (HOST:PORT)."""
        host, _, port = self.listen.rpartition(":")
        try:
            self._server = make_server(host, int(port), self.app, server_class=_Server, handler_class=_Quiet)
        except OSError as exc:
            raise SystemExit(
                f"pyqueue serve: cannot listen for HTTP on {self.listen} ({exc.strerror}): give "
                "--http-listen another HOST:PORT, or --http-listen '' to turn the HTTP port off"
            ) from None
        self.address = f"{host}:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="pyqueue-http", daemon=True)
        self._thread.start()
        log.info("http listening on %s (dashboard at /, /metrics, /healthz)", self.address)
        return self.address

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.dashboard.close()

    def app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path in ("/", "/index.html") or path.startswith("/api/"):
            return self.dashboard.app(environ, start_response)
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _answer(start_response, "405 Method Not Allowed", b"only GET\n")
        if path == "/metrics":
            try:
                body: bytes = asyncio.run_coroutine_threadsafe(self.metrics(), self.loop).result(
                    SCRAPE_TIMEOUT_S
                )
            except Exception as exc:  # a shard that does not answer: say so, never hang the scraper
                log.warning("a metrics scrape failed: %s", exc)
                return _answer(
                    start_response, "503 Service Unavailable", f"metrics unavailable: {exc}\n".encode()
                )
            return _answer(start_response, "200 OK", body, CONTENT_TYPE)
        if path == "/healthz":
            if self.healthy():
                return _answer(start_response, "200 OK", b"ok\n")
            return _answer(start_response, "503 Service Unavailable", b"not serving\n")
        return _answer(start_response, "404 Not Found", b"not found: try /, /metrics or /healthz\n")


def _answer(
    start_response: StartResponse, status: str, body: bytes, content_type: str = "text/plain; charset=utf-8"
) -> list[bytes]:
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]
