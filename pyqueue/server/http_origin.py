"""Who may talk to the HTTP port from a browser: the defences against cross-site requests and DNS
rebinding, for a port that may have no tokens.

- The Host header must name this server: an IP literal (rebinding needs a domain name), localhost,
  this machine's names, the advertised host, or a name given with --http-allow-host (a proxy's).
  A page of evil.example whose name was rebound to 127.0.0.1 sends `Host: evil.example`.
- A request that changes something and carries an Origin (every browser sends one on a cross-site
  POST) must come from an allowed host too.
- The jobs API takes JSON only: `text/plain`, a form's types, are what a page may POST elsewhere
  without asking first (no CORS preflight).
"""

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit


class HostRule:
    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names = {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
        self.names.update(n.lower().strip("[]") for n in names if n)

    def allows(self, host: str) -> bool:
        """Whether a Host header (HOST or HOST:PORT) names this server."""
        name = _hostname(host)
        if not name:
            return False
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return name in self.names or name.endswith(".localhost")
        return True

    def cross_site(self, origin: str) -> bool:
        """Whether an Origin header names a page of another site ('' or "null" from a file is one)."""
        if not origin:
            return False
        parts = urlsplit(origin)
        return parts.scheme not in ("http", "https") or not self.allows(parts.netloc)


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:7412
        return host[1 : host.find("]")] if "]" in host else ""
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
