"""Job functions for the workflow tests: each records its call in LOG (one JSON line)."""

import json
from pathlib import Path
from typing import Any

import pyqueue

app = pyqueue.App()
LOG = Path("/dev/null")
BROKEN = {"bad.jpg"}  # images resize cannot read (a test mends one by removing it)


def ran() -> list[list[Any]]:
    """What ran, in order: [name, *arguments] each."""
    return [json.loads(line) for line in LOG.read_text().splitlines()]


def record(name: str, *args: Any) -> None:
    with LOG.open("a") as f:
        f.write(json.dumps([name, *args]) + "\n")


@app.job(queue="images")  # shard 0 of 2
def resize(image: str) -> str:
    record("resize", image)
    if image in BROKEN:
        raise pyqueue.Kill(f"{image} cannot be read")
    return f"small-{image}"


@app.job(queue="albums")  # shard 1 of 2
def build_album(thumbs: list[str], album: str) -> dict[str, Any]:
    record("build_album", thumbs, album)
    return {"album": album, "size": len(thumbs)}


@app.job(queue="publish")  # shard 1 of 2
def publish(album: dict[str, Any]) -> None:
    record("publish", album)


@app.job(queue="mail")  # shard 0 of 2
def report(status: dict[str, Any], who: str) -> None:
    record("report", status, who)


@app.job(queue="mail")
def celebrate(status: dict[str, Any]) -> None:
    record("celebrate", status)


@app.job(queue="images")
def cover(album: str) -> str:
    record("cover", album)
    return f"{album}.jpg"


@app.job(queue="images")
def split(album: str, pages: int) -> None:
    """A member that adds the rest of the work to its own batch (Sidekiq's child jobs)."""
    record("split", album, pages)
    batch_id = pyqueue.current_job().job.batch_id
    app.client.add_to_batch(batch_id, [resize.s(f"{album}-{page}.jpg") for page in range(pages)])


@app.job(queue="mail")
def send_digest(events: list[dict[str, Any]]) -> None:
    record("send_digest", events)


@app.job(queue="albums")  # shard 1 of 2: after resize, a chain's step on the other shard
def caption(image: str) -> str:
    record("caption", image)
    return f"{image} (captioned)"
