"""What grpcio alone costs on this machine for one request and its answer, with no pyqueue in it:
the floor under any one-job-per-call figure.

    python bench/grpc_floor.py

One sequential sync client (as a web request enqueues) against a server in another process:
a unary call on the sync server and on grpc.aio with uvloop (pyqueue's server), then one message
each way on a bidi stream kept open (what EnqueueStream does). Calls/s and CPU per call on both ends.

Then the same over the native transport (pyqueue._native: HTTP/2 by h2 on tokio, the server its
echo): a unary call and a kept-open stream with Rust on both ends (the wire's own floor), and the
native client against grpc.aio's stream server (what the official client's single enqueues pay
against today's server).
"""

import json
import multiprocessing as mp
import queue
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from single_enqueue import cpu_seconds

SECONDS = 4.0


def serve(kind: str, ports: "mp.Queue[int]") -> None:
    if kind.startswith("native-") and kind != "native-client-stream-aio":
        import threading

        from pyqueue._native import serve_echo

        ports.put(serve_echo("127.0.0.1:0"))
        threading.Event().wait()
        return
    if kind == "unary-sync":
        server = grpc.server(ThreadPoolExecutor(8))
        handler = grpc.unary_unary_rpc_method_handler(lambda request, context: b"ok")
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("b.B", {"M": handler})])
        ports.put(server.add_insecure_port("127.0.0.1:0"))
        server.start()
        server.wait_for_termination()
        return
    import uvloop

    async def unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:  # type: ignore[type-arg]
        return b"ok"

    async def stream(requests: object, context: grpc.aio.ServicerContext) -> None:  # type: ignore[type-arg]
        while (await context.read()) is not grpc.aio.EOF:  # type: ignore[attr-defined]
            await context.write(b"ok")

    async def main() -> None:
        server = grpc.aio.server()
        handler = (
            grpc.unary_unary_rpc_method_handler(unary)
            if kind == "unary-aio"
            else grpc.stream_stream_rpc_method_handler(stream)
        )
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("b.B", {"M": handler})])
        ports.put(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        await server.wait_for_termination()

    uvloop.run(main())


def measure(kind: str) -> dict[str, object]:
    spawn = mp.get_context("spawn")  # a fork after grpc started in this process can hang the child
    ports: mp.Queue[int] = spawn.Queue()
    server = spawn.Process(target=serve, args=(kind, ports), daemon=True)
    server.start()
    address = f"127.0.0.1:{ports.get(timeout=30)}"
    channel = grpc.insecure_channel(address)
    if kind.startswith("native-"):
        from pyqueue._native import WireChannel

        wire = WireChannel(address, [], 1 << 20)
        if kind == "native-unary":

            def call() -> None:
                wire.unary("/b.B/M", b"x", 10.0)
        else:
            stream = wire.open_stream("/b.B/M")

            def call() -> None:
                stream.exchange(b"x", 10.0)
    elif kind == "stream-aio":
        out: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        answers = channel.stream_stream("/b.B/M")(iter(out.get, None))

        def call() -> None:
            out.put(b"x")
            next(answers)
    else:
        unary = channel.unary_unary("/b.B/M")

        def call() -> None:
            unary(b"x")

    for _ in range(500):
        call()
    client_before, server_before, started = time.process_time(), cpu_seconds(server.pid), time.perf_counter()
    calls = 0
    while time.perf_counter() - started < SECONDS:
        call()
        calls += 1
    elapsed = time.perf_counter() - started
    result = {
        "kind": kind,
        "calls_per_s": round(calls / elapsed),
        "server_cpu_ms_per_call": round((cpu_seconds(server.pid) - server_before) / calls * 1000, 3),
        "client_cpu_ms_per_call": round((time.process_time() - client_before) / calls * 1000, 3),
    }
    if kind == "stream-aio":
        out.put(None)
    channel.close()
    server.kill()
    return result


def main() -> None:
    for kind in (
        "unary-sync",
        "unary-aio",
        "stream-aio",
        "native-unary",
        "native-stream",
        "native-client-stream-aio",
    ):
        print(json.dumps(measure(kind)), flush=True)


if __name__ == "__main__":
    main()
