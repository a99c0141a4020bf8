"""The server: gRPC servicers over the engine, and the process that runs them."""

from pyqueue.server.app import serve
from pyqueue.server.config import ServerConfig

__all__ = ["ServerConfig", "serve"]
