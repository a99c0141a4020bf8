"""A FastAPI app that answers at once and hands the slow work to pyqueue.

pip install "pyqueue[server]" fastapi uvicorn    # uvicorn serves the app; FastAPI does not ship one
pyqueue serve &                                  # the server
pyqueue worker fastapi_app:jobs                  # a worker (from this folder)
uvicorn fastapi_app:api                          # the web app
curl -X POST localhost:8000/signup -H 'content-type: application/json' -d '{"email": "ada@example.com"}'
"""

from fastapi import FastAPI
from pydantic import BaseModel

import pyqueue

jobs = pyqueue.App()  # address from PYQUEUE_ADDRESS, else 127.0.0.1:7411
api = FastAPI()


@jobs.job(queue="mail", retries=5)
async def send_welcome(email: str) -> None:
    print(f"welcome mail to {email}")


class Signup(BaseModel):
    email: str


@api.post("/signup", status_code=202)
async def signup(body: Signup) -> dict[str, int | str]:
    job = await send_welcome.enqueue_async(body.email)  # answered once the job is on disk
    return {"job": str(job.id), "status": job.status}  # a string: ids pass 2**53, past what JSON numbers keep
