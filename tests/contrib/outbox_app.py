"""A worker app for test_outbox: its job writes "ran" to the file it is given."""

from pathlib import Path

import pyqueue

app = pyqueue.App()


@app.job(queue="outbox")
def note(path: str) -> None:
    Path(path).write_text("ran")
