"""`pyqueue top` in a real terminal (tmux): it shows the queues live, pauses and resumes the
selected one with keys, and quits on q."""

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from harness import ServerProcess

import pyqueue

TMUX = shutil.which("tmux")


def wait(
    what: str, check: Callable[[], bool], timeout: float = 30.0, detail: Callable[[], str] = str
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never saw: {what}\n{detail()}"
        time.sleep(0.1)


@pytest.mark.skipif(TMUX is None and not os.environ.get("CI"), reason="tmux is not installed")
def test_top_shows_queues_and_pauses_and_resumes_the_selected_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert TMUX is not None, "CI installs tmux (.ci/run)"
    server = ServerProcess(tmp_path / "data").start()
    tmux = [TMUX, "-L", f"pyqueue-top-{os.getpid()}", "-f", os.devnull]
    try:
        with pyqueue.Client(server.address) as client:
            client.enqueue_many([{"type": "t", "queue": "alpha"} for _ in range(3)])
            client.enqueue_many([{"type": "t", "queue": "beta"} for _ in range(2)])
            command = f"{sys.executable} -m pyqueue --address {server.address} top"
            # rich takes its width from COLUMNS before the terminal: a 160-wide table whatever size
            # tmux gave the window (it was once 80 wide, and "beta (paused)" wrapped)
            env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "30"}
            subprocess.run(
                [*tmux, "new-session", "-d", "-s", "top", "-x", "160", "-y", "30", command],
                check=True,
                env=env,
            )

            def screen() -> str:
                return subprocess.run(
                    [*tmux, "capture-pane", "-p", "-t", "top"], capture_output=True, text=True
                ).stdout

            def paused(queue: str) -> bool:
                return next(q.paused for q in client.queues() if q.name == queue)

            wait("both queues on screen", lambda: "alpha" in screen() and "beta" in screen())
            cells = [[c.strip() for c in line.split("│") if c.strip()] for line in screen().splitlines()]
            assert ["alpha", "3", "0", "0", "0"] in [row[:5] for row in cells], screen()
            subprocess.run([*tmux, "send-keys", "-t", "top", "j", "p"], check=True)
            wait("beta paused", lambda: paused("beta"))
            wait("the pause on screen", lambda: "beta (paused)" in screen(), detail=screen)
            assert not paused("alpha")
            subprocess.run([*tmux, "send-keys", "-t", "top", "r"], check=True)
            wait("beta resumed", lambda: not paused("beta"))
            subprocess.run([*tmux, "send-keys", "-t", "top", "q"], check=True)
            wait(
                "top quit",
                lambda: (
                    subprocess.run([*tmux, "has-session", "-t", "top"], capture_output=True).returncode != 0
                ),
            )
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        server.close()
