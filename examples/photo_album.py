"""A workflow on a two-shard server: resize every photo, build the album from the thumbnails (in
order), then publish it; a batch reports each upload, dead photos listed, and its retry.

    python examples/photo_album.py

The steps' queues live on both shards: the server hands each step its input across them. Here a
loop of `drain` runs the jobs in this process; in production `pyqueue worker photo_album:app`
does, and nothing polls.
"""

import time
from typing import Any

import pyqueue
from pyqueue.testing import drain, embedded_server

app = pyqueue.App()
QUEUES = ["images", "albums", "mail"]
unreadable = {"cat.heic"}
done: list[str] = []


@app.job(queue="images")
def resize(photo: str) -> str:
    if photo in unreadable:
        raise pyqueue.Kill(f"cannot read {photo}")
    return f"thumb-{photo}"


@app.job(queue="albums")
def build_album(thumbnails: list[str], title: str) -> dict[str, Any]:
    return {"title": title, "pages": thumbnails}


@app.job(queue="albums")
def publish(album: dict[str, Any]) -> None:
    done.append(f"published {album['title']}: {', '.join(album['pages'])}")


@app.job(queue="mail")
def upload_report(status: dict[str, Any]) -> None:
    done.append(f"upload report: {status['completed']} resized, {status['dead']} dead")


def run_until(finished: int) -> None:
    """Run jobs here until `finished` steps have reported (steps cross shards through the relay)."""
    deadline = time.monotonic() + 60
    while len(done) < finished and time.monotonic() < deadline:
        drain(app, QUEUES, idle_s=0.1)


def main() -> None:
    with embedded_server(None, "--shards", "2") as address:
        app.address = address
        photos = ["beach.jpg", "dog.png", "sunset.jpg"]
        album = app.group(resize.s(p) for p in photos).then(build_album.s("summer")).then(publish.s())
        album.enqueue()
        run_until(1)

        uploads = [resize.s("cake.jpg"), resize.s("cat.heic")]
        upload = pyqueue.Batch(uploads, on_complete=upload_report.s(), name="upload", keep=3600)
        run = upload.enqueue()
        run_until(2)
        info = app.client.batch(run.batch_id)
        print(f"batch {info.name}: {info.completed} completed, {len(info.dead_jobs)} dead")
        unreadable.clear()  # converted: retry what died; on_complete fired already, and never again
        app.client.retry_workflow(run.workflow_id)
        deadline = time.monotonic() + 60
        while app.client.batch(run.batch_id).pending and time.monotonic() < deadline:
            drain(app, QUEUES, idle_s=0.1)
        print("\n".join(done))
        print("after the retry:", app.client.batch(run.batch_id).completed, "completed")
        app.close()


if __name__ == "__main__":
    main()
