"""Queue limits enforced at claim time, across worker processes: the observed concurrency never
passes `max_running` (in all, or per limit key), and a rate-limited queue runs at its rate (within
10%)."""

import signal

import pytest
import sample_app
from test_worker import start_worker, wait_for_lines


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, step in events:  # at a tie, an end (-1) sorts before a start: touching is not overlapping
        running += step
        peak = max(peak, running)
    return peak


@pytest.mark.timeout(120)
def test_max_running_holds_across_two_worker_processes(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    client.set_queue_limit("limited", max_running=3)
    sample_app.overlap.enqueue_many([(0.15,)] * 24)
    workers = [start_worker(server, log, "--concurrency", "4") for _ in range(2)]
    try:
        lines = wait_for_lines(log, 24, timeout=60)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.communicate(timeout=60)
    intervals = [(float(a), float(b)) for _, a, b in (line.split() for line in lines)]
    assert most_at_once(intervals) == 3, "never more than 3 at once, and the 8 slots did fill 3"
    assert client.queues()[0].limits == "max 3 running"


@pytest.mark.timeout(120)
def test_key_max_running_holds_per_key_across_two_worker_processes(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    client.set_queue_limit("keyed", key_max_running=2)
    customers = ("acme", "globex", "initech")
    sample_app.per_customer.enqueue_many([(c, 0.15) for c in customers for _ in range(8)])
    workers = [start_worker(server, log, "--concurrency", "4") for _ in range(2)]
    try:
        lines = wait_for_lines(log, 24, timeout=60)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.communicate(timeout=60)
    by_customer: dict[str, list[tuple[float, float]]] = {c: [] for c in customers}
    for _, customer, a, b in (line.split() for line in lines):
        by_customer[customer].append((float(a), float(b)))
    for customer, intervals in by_customer.items():
        assert most_at_once(intervals) == 2, f"{customer}: never more than 2 at once, and 2 did run"
    everyone = [interval for intervals in by_customer.values() for interval in intervals]
    assert most_at_once(everyone) > 2, "the keys ran beside each other"


@pytest.mark.timeout(120)
def test_a_rate_limited_queue_runs_at_its_rate(app, client, server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "ran.log"
    client.set_queue_limit("rated", rate="20/s", burst=1)
    sample_app.stamp.enqueue_many([()] * 41)
    workers = [start_worker(server, log, "--concurrency", "4") for _ in range(2)]
    try:
        lines = wait_for_lines(log, 41, timeout=60)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.communicate(timeout=60)
    starts = sorted(float(line.split()[1]) for line in lines)
    seconds = starts[-1] - starts[0]  # 40 tokens after the first job's at 20/s: 2 s
    assert 1.8 <= seconds <= 2.2, f"41 jobs at 20/s took {seconds:.2f}s"
