"""An app with a periodic job (for tests/app/test_cron.py): a beat every second, kept by the server."""

import pyqueue

app = pyqueue.App()


@app.periodic("* * * * * *")
@app.job(queue="cron", name="beat")
def beat() -> None:
    pass


app.limit("cron", max_running=1)  # declared by `pyqueue worker` with the periodic job
