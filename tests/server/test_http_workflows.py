"""Workflows over HTTP/JSON: the curl examples of docs/http.md's "Workflows" run as written
against a real server, a chain and a chord run with each step handed the one before's result,
and a bad step is refused with where it is, making nothing."""

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from harness import ServerProcess, json_call

import pyqueue

DOC = Path(__file__).resolve().parents[2] / "docs" / "http.md"
BLOCKS = re.findall(r"```sh\n(.*?)```", DOC.read_text().split("## Workflows")[1], re.S)


def _call(http: str, path: str, body: Any = None, kind: str = "application/json") -> tuple[int, Any]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    return json_call(f"http://{http}{path}", data, kind)


def _run_one(
    client: pyqueue.Client, queue: str, result: Callable[[pyqueue.Job], Any] = lambda job: None
) -> pyqueue.Job:
    """Take the next job of `queue` and ack it with `result(job)`, as a worker would."""
    with client.take(queue) as stream:
        job = stream.next(timeout=30)
        assert job is not None, f"nothing came on {queue}"
        job.ack(result(job))
        return job


@pytest.mark.skipif(
    subprocess.run(["which", "curl"], capture_output=True).returncode != 0, reason="needs curl"
)
def test_the_documented_curl_examples_run(server: ServerProcess, client: pyqueue.Client) -> None:
    assert len(BLOCKS) == 3, "the test knows each example"

    def curl(block: str, batch_id: str = "") -> Any:
        script = block.replace("localhost:7412", server.http_address).replace("BATCH_ID", batch_id)
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    started = curl(BLOCKS[0])
    assert started["batch_id"] == started["workflow_id"] != "0", started
    assert [j.payload["args"] for j in client.list_jobs(queues=["images"])] == [
        ["a.jpg"],
        ["b.jpg"],
        ["c.jpg"],
    ]
    progress = curl(BLOCKS[1], started["batch_id"])
    assert (progress["name"], progress["total"], progress["pending"]) == ("album", 3, 3)
    assert curl(BLOCKS[2], started["batch_id"]) == {"workflow_id": started["workflow_id"], "cancel": 3}
    assert client.count_jobs(queue="images", status="cancelled") == 3
    assert client.count_jobs(queue="mail") == 0, "a cancelled workflow fires no callback"


def test_a_chain_and_a_chord_hand_each_step_what_the_one_before_gave(
    server: ServerProcess, client: pyqueue.Client
) -> None:
    http = server.http_address
    status, run = _call(
        http, "/v1/workflows", {"chain": [{"type": "fetch", "queue": "c"}, {"type": "parse", "queue": "c"}]}
    )
    assert status == 200 and run["job_id"] != "0", run
    fetched = _run_one(client, "c", lambda job: "<html>")
    assert fetched.type == "fetch" and not fetched.has_input
    parsed = _run_one(client, "c")
    assert (parsed.type, parsed.input, parsed.workflow_id) == ("parse", "<html>", int(run["workflow_id"]))

    # A chord whose first member is a chain: that member hands on its last job's result.
    count = [{"type": "count", "queue": "g", "payload": n} for n in (1, 2, 3)]
    chord = {
        "chain": [
            {"group": [{"chain": [count[0], count[2]]}, count[1]], "keep": 60},
            {"type": "sum", "queue": "g"},
        ]
    }
    status, run = _call(http, "/v1/workflows", chord)
    assert status == 200, run
    for _ in range(3):
        _run_one(client, "g", lambda member: member.payload * 10)
    total = _run_one(client, "g")
    assert (total.type, total.input) == ("sum", [30, 20]), "the members' results, in order"
    status, batch = _call(http, f"/v1/batches/{run['batch_id']}")
    assert status == 200 and (batch["completed"], batch["pending"]) == (2, 0), batch
    assert _call(http, "/v1/batches/12345")[0] == 404
    status, answer = _call(http, f"/v1/batches/{2**64}")
    assert status == 400 and "batch 18446744073709551616 is not an id" in answer["error"], answer


def test_a_bad_step_is_refused_with_where_it_is_and_makes_nothing(
    server: ServerProcess, client: pyqueue.Client
) -> None:
    http = server.http_address
    job = {"type": "t", "queue": "q"}
    deep: dict[str, Any] = job
    for _ in range(40):
        deep = {"chain": [deep]}
    cases = [
        ([job], "the workflow: a step is a JSON object"),
        ({"chain": []}, '"chain" is a list of at least one step'),
        ({"chain": [job], "name": "x"}, 'a chain has only "chain" (found name)'),
        ({"group": [job, {"group": [job]}]}, "the workflow, member 1: a member is a job or a chain of jobs"),
        ({"group": [{"chain": [job, {"group": [job]}]}]}, "member 0: a member is a job or a chain of jobs"),
        ({"group": [job], "size": 3}, "unknown fields of a group size"),
        ({"group": [job], "on_success": {"group": [job]}}, "on_success must be a job"),
        ({"group": [job], "keep": "long"}, '"keep" is a finite number of seconds'),
        ({"chain": [job, {"type": "t", "fresh": "yes"}]}, 'chain step 1: "fresh" is true or false'),
        ({"chain": [job, {"queue": "q"}]}, 'chain step 1: a job is a JSON object with a string "type"'),
        (
            {"chain": [job, {"type": "t", "priority": "high"}]},
            "chain step 1: priority must be a whole number",
        ),
        ({"group": [{**job, "unique_key": "k"}]}, "unique"),  # refused by the server's own check
        (deep, "nested more than 32 deep"),
    ]
    for body, said in cases:
        status, answer = _call(http, "/v1/workflows", body)
        assert status == 400 and said in answer["error"], (body, answer)
        assert answer["code"] == "INVALID_ARGUMENT"
    # Reading stops past --max-workflow-jobs (10,000 here): 700,000 steps cost 8 s of CPU.
    status, answer = _call(http, "/v1/workflows", {"chain": [job] * 200_000})
    assert status == 413 and "more than 10000 jobs (--max-workflow-jobs)" in answer["error"], answer
    assert _call(http, "/v1/workflows", b"{}", kind="text/plain")[0] == 415, "another site's form"
    assert _call(http, "/v1/workflows/1/cancel", b"{}", kind="text/plain")[0] == 415
    assert _call(http, "/v1/workflows")[0] == 405
    assert client.count_jobs() == 0 and client.batches() == [], "nothing was made"
