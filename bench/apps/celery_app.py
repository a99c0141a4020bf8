"""The same no-op, as a Celery task on Redis (for the comparison in bench/python_side.py)."""

import os

from celery import Celery

app = Celery("bench", broker=os.environ.get("CELERY_BROKER", "redis://127.0.0.1:6390/0"))
app.conf.task_ignore_result = True
app.conf.worker_prefetch_multiplier = 4
app.conf.task_acks_late = True  # like pyqueue: acknowledge after the work, so a lost worker's job returns


@app.task
def noop() -> None:
    pass
