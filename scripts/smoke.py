"""A client/server smoke test of an installed pyqueue (run with the installed interpreter, from
anywhere but a checkout): serve on loopback, enqueue, take, ack, read the result back, stop."""

import platform
import re
import subprocess
import sys
import tempfile

import pyqueue


def main() -> None:
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen(
            [sys.executable, "-m", "pyqueue", "serve", "--data-dir", f"{data}/store", "--listen", "127.0.0.1:0",
             "--shards", "1", "--http-listen", ""],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=data,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            for line in server.stdout:
                match = re.search(r"listening on (\S+:\d+)", line)
                if match:
                    break
            else:
                raise SystemExit("the server never listened")
            with pyqueue.Client(match.group(1), timeout=60) as client:
                job = client.enqueue("smoke", {"n": 1}, keep_result=60)
                with client.take("default") as stream:
                    taken = stream.next(timeout=60)
                    assert taken is not None and taken.id == job.id
                    taken.ack({"ok": True})
                assert client.result(job.id, timeout=60) == {"ok": True}
        finally:
            server.terminate()
            server.wait(60)
    print(
        f"smoke ok: pyqueue {pyqueue.__version__} (native {pyqueue.native.__version__}) on {platform.machine()}"
    )


if __name__ == "__main__":
    main()
