"""The sample project of Celery's "First steps" guide (proj/celery.py, proj/tasks.py), as written
for any broker: only the two URLs name pyqueue, and they come from the environment here."""

import os

from celery import Celery

app = Celery(
    "proj",
    broker=os.environ.get("CELERY_BROKER_URL", "pyqueue://127.0.0.1:7411"),
    backend=os.environ.get("CELERY_RESULT_BACKEND", "pyqueue://127.0.0.1:7411"),
    include=["proj.tasks"],
)

app.conf.update(
    result_expires=3600,
    task_track_started=True,
    beat_schedule={
        "tick-every-second": {"task": "proj.tasks.tick", "schedule": 1.0},
    },
)

if __name__ == "__main__":
    app.start()
