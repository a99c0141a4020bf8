"""Jobs over HTTP/JSON: the curl examples of docs/http.md run as written against a real server,
and bad bodies get a clear 4xx and change nothing."""

import json
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from harness import ServerProcess, json_call

import pyqueue

DOC = Path(__file__).resolve().parents[2] / "docs" / "http.md"
BLOCKS = re.findall(r"```sh\n(.*?)```", DOC.read_text().split("## Workflows")[0], re.S)


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
    return json_call(f"http://{http}/v1/jobs", body)  # type: ignore[no-any-return]


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
        (
            b'{"type": "t", "delay": Infinity}',
            400,
            "job 0: delay must be a finite number of seconds (it is inf)",
        ),
        (
            b'{"type": "t", "delay": "10"}',
            400,
            'job 0: delay must be a finite number of seconds (it is "10")',
        ),
        (b'{"type": "t", "run_at": 12345}', 400, "job 0: run_at must be an ISO 8601 time"),
        (b'{"type": "t", "priority": 1e400}', 400, "job 0: priority must be a whole number"),
        (b'{"type": "t", "priority": 18446744073709551616}', 400, "job 0: priority must be a whole number"),
        (b'{"type": "t", "backoff": [1, 2]}', 400, "job 0: backoff must be [base_s, exponent, jitter_s]"),
        (b'{"type": "t", "headers": {"a": 1}}', 400, "job 0: headers must be an object of strings"),
        (b'{"type": "t", "unique_in_queue": "yes"}', 400, "job 0: unique_in_queue must be true or false"),
        (b'{"type": "t", "payload": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "nested too deeply"),
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
    for huge in ("18446744073709551616", "9" * 40):
        with pytest.raises(urllib.error.HTTPError) as out_of_range:
            urllib.request.urlopen(f"http://{http}/v1/jobs/{huge}", timeout=20)
        assert out_of_range.value.code == 400
        assert (
            "is not an id: ids are whole numbers below 2^64" in json.loads(out_of_range.value.read())["error"]
        )
    with pytest.raises(urllib.error.HTTPError) as wrong_method:
        urllib.request.urlopen(urllib.request.Request(f"http://{http}/v1/jobs", method="PUT"), timeout=20)
    assert wrong_method.value.code == 405
    assert json.loads(wrong_method.value.read())["code"] == "UNIMPLEMENTED"


def _raw(http: str, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict]:  # type: ignore[type-arg]
    request = urllib.request.Request(
        f"http://{http}{path}", data=body or None, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_requests_another_site_could_make_are_refused(server: ServerProcess, client: pyqueue.Client) -> None:
    """What a page of evil.example could send a server without tokens, from a browser: a "simple"
    cross-site POST (text/plain, no preflight), a POST naming its Origin, and, through DNS
    rebinding, any request with its own name as Host. Each is refused and nothing is enqueued."""
    http = server.http_address
    job = json.dumps({"type": "t"}).encode()
    status, answer = _raw(http, "POST", "/v1/jobs", {"Content-Type": "text/plain"}, job)
    assert (status, answer["code"]) == (415, "INVALID_ARGUMENT") and "application/json" in answer["error"]
    cross = {"Content-Type": "application/json", "Origin": "http://evil.example"}
    status, answer = _raw(http, "POST", "/v1/jobs", cross, job)
    assert (status, answer["code"]) == (403, "PERMISSION_DENIED") and "another site" in answer["error"]
    for method, path in (("POST", "/v1/jobs"), ("GET", "/api/queues"), ("GET", "/metrics"), ("GET", "/")):
        status, answer = _raw(
            http,
            method,
            path,
            {"Host": "evil.example", "Content-Type": "application/json"},
            job if method == "POST" else b"",
        )
        assert (status, answer["code"]) == (403, "PERMISSION_DENIED"), (path, answer)
        assert "--http-allow-host" in answer["error"]
    assert client.count_jobs() == 0
    same_site = {"Content-Type": "application/json", "Origin": f"http://{http}", "Host": "localhost"}
    assert _raw(http, "POST", "/v1/jobs", same_site, job)[0] == 200  # the dashboard's own page
    assert client.count_jobs() == 1


def test_a_proxy_name_is_allowed_with_http_allow_host(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--http-allow-host", "queue.internal").start()
    try:
        status, _ = _raw(server.http_address, "GET", "/api/queues", {"Host": "queue.internal:443"})
        assert status == 200
        assert _raw(server.http_address, "GET", "/api/queues", {"Host": "other.internal"})[0] == 403
    finally:
        server.close()
