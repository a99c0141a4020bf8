"""Jobs over HTTP/JSON: the curl examples of docs/http.md run as written against a real server,
and bad bodies get a clear 4xx and change nothing."""

import json
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from harness import ServerProcess

import pyqueue

DOC = Path(__file__).resolve().parents[2] / "docs" / "http.md"
BLOCKS = re.findall(r"```sh\n(.*?)```", DOC.read_text(), re.S)


def _curl(block: str, http: str, job_id: str = "") -> dict:  # type: ignore[type-arg]
    script = block.replace("localhost:7412", http).replace("JOB_ID", job_id)
    out = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYQUEUE_TOKEN": "pq_x", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(
    subprocess.run(["which", "curl"], capture_output=True).returncode != 0, reason="needs curl"
)
def test_the_documented_curl_examples_run(server: ServerProcess, client: pyqueue.Client) -> None:
    assert len(BLOCKS) == 4, "the test knows each example"
    one = _curl(BLOCKS[0], server.http_address)
    assert isinstance(one["id"], str) and one["status"] == "ready" and not one["duplicate"]
    sent = client.get_job(int(one["id"]))
    assert (sent.type, sent.queue, sent.payload) == (
        "emails.send",
        "emails",
        {"args": ["ada@example.com"], "kwargs": {}},
    )
    many = _curl(BLOCKS[1], server.http_address)
    assert [j["status"] for j in many["jobs"]] == ["ready", "scheduled"]
    assert client.count_jobs(queues=["reports"]) == 2
    looked_up = _curl(BLOCKS[2], server.http_address, one["id"])
    assert looked_up["id"] == one["id"] and looked_up["queue"] == "emails"
    assert _curl(BLOCKS[3], server.http_address)["status"] == "ready"


def _post(http: str, body: bytes) -> tuple[int, dict]:  # type: ignore[type-arg]
    request = urllib.request.Request(f"http://{http}/v1/jobs", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_bad_bodies_are_refused_clearly_and_change_nothing(
    server: ServerProcess, client: pyqueue.Client
) -> None:
    http = server.http_address
    cases = [
        (b"{not json", 400, "not JSON"),
        (b'{"queue": "q"}', 400, '"type"'),
        (b'{"type": "t", "colour": "red"}', 400, "unknown fields colour"),
        (b'{"type": "t", "queue": "no spaces"}', 400, "may hold only"),
        (b'{"type": "t", "run_at": "tomorrow"}', 400, "ISO 8601"),
        (b"[]", 400, "no jobs"),
        (json.dumps([{"type": "t"}] * 1001).encode(), 413, "split the batch"),
        (json.dumps({"type": "t", "payload": "x" * (1 << 20)}).encode(), 413, "payload is"),
    ]
    for body, status, words in cases:
        got, answer = _post(http, body)
        assert (got, words in answer["error"]) == (status, True), (body[:40], got, answer)
        code = "INVALID_ARGUMENT" if status == 400 else "RESOURCE_EXHAUSTED"
        assert answer["code"] == code, answer  # the documented {"error", "code"} shape
    assert client.count_jobs() == 0
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://{http}/v1/jobs/12345", timeout=20)
    assert missing.value.code == 404
    assert json.loads(missing.value.read())["code"] == "NOT_FOUND"
    with pytest.raises(urllib.error.HTTPError) as wrong_method:
        urllib.request.urlopen(urllib.request.Request(f"http://{http}/v1/jobs", method="PUT"), timeout=20)
    assert wrong_method.value.code == 405
    assert json.loads(wrong_method.value.read())["code"] == "UNIMPLEMENTED"
