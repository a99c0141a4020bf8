"""pyqueue in one script: start an embedded server, declare jobs, enqueue them, run them.

    python examples/plain_script.py

In production the server runs on its own (`pyqueue serve`) and workers with `pyqueue worker
plain_script:app`; here everything runs in this process so the script shows the whole cycle.
"""

import pyqueue
from pyqueue.testing import drain, embedded_server

app = pyqueue.App()


@app.job(queue="reports", retries=3)
def build_report(customer: str, month: int) -> str:
    return f"report for {customer}, month {month}"


@app.job(queue="reports")
async def notify(customer: str) -> None:
    print(f"notified {customer}")


def main() -> None:
    with embedded_server() as address:
        app.address = address
        for customer in ("acme", "globex"):
            build_report.enqueue(customer, month=11)
            notify.enqueue(customer)
        delayed = build_report.options(delay=3600).enqueue("initech", month=12)
        print("scheduled for later:", app.client.get_job(delayed.id).status)
        result = drain(app)
        print(f"ran {len(result.ran)} jobs, {len(result.failed)} failed")
        app.close()


if __name__ == "__main__":
    main()
