"""The web dashboard in a real browser (headless Chromium through Selenium): queues with counts,
the job list with filters and paging, a job's payload and error history, retry, delete, pause and resume
behind a confirmation, the workers page; and its JSON API refusing what it must."""

import json
import os
import urllib.error
import urllib.request

import pytest
from browsers import needs_browser
from harness import ServerProcess, queue_on

import pyqueue

pytestmark = needs_browser


def test_the_dashboard_shows_and_steers_the_queues(tmp_path, browser) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    server = ServerProcess(tmp_path / "data").start()
    wait = WebDriverWait(browser, 30)
    try:
        with pyqueue.Client(server.address) as client:
            dead = client.enqueue("send", {"to": "ada@example.com"}, queue="mail", max_retries=0)
            doomed = client.enqueue("send", {"to": "bob@example.com"}, queue="mail", delay=3600)
            client.enqueue("resize", queue="media")
            worker = client.take("mail")
            job = worker.next(timeout=30)
            assert job is not None and job.id == dead.id
            job.fail("smtp refused", error_type="SMTPError")
            base = f"http://{server.http_address}/"

            # Queues, with their counts and a worker.
            browser.get(base)
            wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, 'tr[data-queue="mail"]')))
            mail = browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="mail"]')
            assert mail.find_element(By.CSS_SELECTOR, 'td[data-count="dead"]').text == "1"
            assert mail.find_element(By.CSS_SELECTOR, 'td[data-count="scheduled"]').text == "1"
            assert (
                browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="media"] td[data-count="ready"]').text
                == "1"
            )

            # Pause and resume behind a confirmation; dismissing it changes nothing.
            browser.find_element(
                By.CSS_SELECTOR, 'tr[data-queue="media"] button[data-action="pause"]'
            ).click()
            wait.until(EC.alert_is_present()).dismiss()
            assert not {q.name: q.paused for q in client.queues()}["media"]
            browser.find_element(
                By.CSS_SELECTOR, 'tr[data-queue="media"] button[data-action="pause"]'
            ).click()
            wait.until(EC.alert_is_present()).accept()
            wait.until(lambda _: {q.name: q.paused for q in client.queues()}["media"])
            wait.until(
                EC.presence_of_element_located(
                    (By.CSS_SELECTOR, 'tr[data-queue="media"] button[data-action="resume"]')
                )
            ).click()
            wait.until(EC.alert_is_present()).accept()
            wait.until(lambda _: not {q.name: q.paused for q in client.queues()}["media"])

            # The job list pages by cursor.
            browser.get(f"{base}#/jobs?queue=mail&limit=1")
            wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, f'tr[data-job="{dead.id}"]')))
            browser.find_element(By.ID, "next-page").click()
            wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, f'tr[data-job="{doomed.id}"]')))
            assert len(browser.find_elements(By.CSS_SELECTOR, "#jobs-table tbody tr[data-job]")) == 1
            assert browser.find_elements(By.ID, "prev-page")
            browser.get(base)
            wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, 'tr[data-queue="mail"]')))

            # The job list, filtered to the dead jobs of mail, then the job's page.
            browser.find_element(By.LINK_TEXT, "mail").click()
            wait.until(EC.presence_of_element_located((By.ID, "jobs-table")))
            Select(browser.find_element(By.ID, "filter-status")).select_by_value("dead")
            browser.find_element(By.ID, "apply-filter").click()
            wait.until(
                lambda b: (
                    b.find_elements(By.CSS_SELECTOR, "#jobs-table tbody tr[data-job]")
                    and "status=dead" in b.current_url
                )
            )
            rows = browser.find_elements(By.CSS_SELECTOR, "#jobs-table tbody tr[data-job]")
            assert [r.get_attribute("data-job") for r in rows] == [str(dead.id)]
            browser.find_element(By.LINK_TEXT, str(dead.id)).click()
            wait.until(EC.text_to_be_present_in_element((By.ID, "job-status"), "dead"))
            assert json.loads(browser.find_element(By.ID, "payload").text) == {"to": "ada@example.com"}
            assert browser.find_element(By.CSS_SELECTOR, "#errors .error-message").text == "smtp refused"

            # Retry the dead job: it is ready again, with its error history.
            worker.close()
            browser.find_element(By.ID, "retry").click()
            wait.until(EC.alert_is_present()).accept()
            wait.until(EC.text_to_be_present_in_element((By.ID, "job-status"), "ready"))
            assert client.get_job(dead.id).status == "ready"
            assert browser.find_element(By.CSS_SELECTOR, "#errors .error-message").text == "smtp refused"

            # Delete another job from its page.
            browser.get(f"{base}#/job/{doomed.id}")
            wait.until(EC.text_to_be_present_in_element((By.ID, "job-status"), "scheduled"))
            browser.find_element(By.ID, "delete").click()
            wait.until(EC.alert_is_present()).accept()
            wait.until(lambda _: client.count_jobs(queue="mail", status="scheduled") == 0)
            with pytest.raises(pyqueue.errors.NotFound):
                client.get_job(doomed.id)
            # The page moves to the job list once it has the answer: wait for that before going
            # elsewhere, or its move lands after ours.
            wait.until(lambda b: b.current_url.endswith("#/jobs"))

            # The workers page lists a connected worker.
            with client.take("media"):
                browser.get(f"{base}#/workers")
                _wait_for_this_worker(wait, browser, client)
    finally:
        server.close()


def test_the_api_refuses_changes_without_its_header_and_bad_filters(tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = ServerProcess(tmp_path / "data").start()
    try:
        with pyqueue.Client(server.address) as client:
            job = client.enqueue("t", queue="mail")
        base = f"http://{server.http_address}"

        def call(path: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, dict]:  # type: ignore[type-arg]
            request = urllib.request.Request(base + path, method=method, headers=headers or {})
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    return answer.status, json.loads(answer.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())

        assert call(f"/api/jobs/{job.id}/delete", "POST")[0] == 403
        assert call("/api/jobs?status=bogus") == (
            400,
            {
                "error": "unknown status 'bogus'; one of scheduled, ready, in_flight, completed, dead, cancelled",
                "code": "INVALID_ARGUMENT",
            },
        )
        assert call("/api/jobs/12345")[0] == 404
        assert call("/api/jobs/99999999999999999999999") == (
            400,
            {
                "error": "job 99999999999999999999999 is not an id: ids are whole numbers below 2^64",
                "code": "INVALID_ARGUMENT",
            },
        )
        status, body = call("/api/jobs?limit=abc")
        assert status == 400 and body["error"] == "limit 'abc' is not a whole number from 1 to 200", body
        assert call("/api/workflows/12345/cancel", "POST")[0] == 403, "a change needs its header"
        # No shard knows the workflow (no job of it, no batch, no step on its way in an outbox).
        status, body = call("/api/workflows/12345/cancel", "POST", {"X-Pyqueue-Action": "1"})
        assert (status, body["code"]) == (404, "NOT_FOUND"), body
        status, body = call(f"/api/jobs/{job.id}/retry", "POST", {"X-Pyqueue-Action": "1"})
        assert status == 400 and "not dead" in body["error"]
        status, body = call("/api/jobs?queue=mail")
        assert status == 200 and body["jobs"][0]["id"] == str(job.id), "ids are strings in JSON"
        status, body = call("/api/queues/mail/weight?key=a&weight=0", "POST", {"X-Pyqueue-Action": "1"})
        assert status == 400 and "outside 1..10000" in body["error"], body
        status, body = call("/api/queues/mail/weight?weight=2", "POST", {"X-Pyqueue-Action": "1"})
        assert status == 400 and "?key=FAIR_KEY&weight=N" in body["error"], body
        assert call("/api/queues/mail/weight?key=a&weight=2", "POST")[0] == 403, "a change needs its header"
        status, body = call("/api/queues/mail/keys?limit=5")
        assert (status, body["key_count"], body["weights"]) == (200, 0, {}), body
        with pyqueue.Client(server.address) as client:
            assert client.get_job(job.id).status == "ready", "nothing changed"
            assert client.fair_keys("mail").weights == {}, "no weight was set"
    finally:
        server.close()


def test_on_two_shards_one_worker_is_one_row_limits_show_and_job_links_work(tmp_path, browser) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    wait = WebDriverWait(browser, 30)
    try:
        with pyqueue.Client(server.address) as client:
            first, second = _one_queue_per_shard(client)
            client.set_queue_limit(first, max_running=5)
            job = client.enqueue("send", {"to": "ada@example.com"}, queue=second)
            base = f"http://{server.http_address}/"

            browser.get(base)
            wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, f'tr[data-queue="{first}"]')))
            limits = browser.find_element(By.CSS_SELECTOR, f'tr[data-queue="{first}"] td.limits').text
            assert limits == "max 5 running"

            browser.get(f"{base}#/jobs/{job.id}")  # the link a person pastes
            wait.until(EC.text_to_be_present_in_element((By.ID, "job-status"), "ready"))
            assert (
                browser.find_element(By.ID, "job-max_retries").text == "the server's default (--max-retries)"
            )

            with client.take([first, second]):  # one worker, a stream to each shard
                browser.get(f"{base}#/workers")
                _wait_for_this_worker(wait, browser, client)
                rows = browser.find_elements(By.CSS_SELECTOR, "#workers-table tbody tr")
                assert len(rows) == 1, [r.text for r in rows]
                assert first in rows[0].text and second in rows[0].text
    finally:
        server.close()


def _wait_for_this_worker(wait, browser, client: pyqueue.Client) -> None:  # type: ignore[no-untyped-def]
    """Wait until the workers page lists this process; past the wait, fail with what the page
    and the server said (the page refreshes every 2 s, so a late stream shows on a refresh)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    try:
        wait.until(EC.text_to_be_present_in_element((By.ID, "workers-table"), f"pid {os.getpid()}"))
    except TimeoutException:
        page = browser.find_element(By.TAG_NAME, "body").text
        raise AssertionError(
            f"the workers page never listed pid {os.getpid()}; it shows:\n{page}\n"
            f"the server lists: {client.workers()}"
        ) from None


def _one_queue_per_shard(client: pyqueue.Client) -> tuple[str, str]:
    topology = client.topology()
    assert topology is not None
    return queue_on(topology, 0), queue_on(topology, 1)


def _click(wait, locator) -> None:  # type: ignore[no-untyped-def]
    """Click what `locator` finds, again if the page redrew it meanwhile (the queues page redraws
    every 2 s, and an element found before a redraw is stale)."""
    from selenium.common.exceptions import StaleElementReferenceException

    def attempt(browser) -> bool:  # type: ignore[no-untyped-def]
        try:
            browser.find_element(*locator).click()
        except StaleElementReferenceException:
            return False
        return True

    wait.until(attempt)


def _screenshot(browser, tmp_path, name: str) -> None:  # type: ignore[no-untyped-def]
    """Each page as a person sees it, kept with the test run (PYQUEUE_SCREENSHOTS, else tmp_path)."""
    from pathlib import Path

    where = Path(os.environ.get("PYQUEUE_SCREENSHOTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(where / f"{name}.png"))


def test_dead_jobs_are_retried_or_deleted_per_queue_and_a_failure_shows_its_backtrace(
    tmp_path, browser
) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    server = ServerProcess(tmp_path / "data").start()
    wait = WebDriverWait(browser, 30)
    try:
        with pyqueue.Client(server.address) as client:
            for queue in ("mail", "junk"):
                client.enqueue_many([{"type": "send", "queue": queue, "max_retries": 0}] * 2)
                with client.take(queue, prefetch=2) as stream:
                    for _ in range(2):
                        job = stream.next(timeout=30)
                        assert job is not None
                        job.fail(
                            "smtp refused", error_type="SMTPError", backtrace="Traceback: line 7 in send"
                        )
            base = f"http://{server.http_address}/"
            browser.get(base)
            retry = (By.CSS_SELECTOR, 'tr[data-queue="mail"] button[data-action="retry-dead"]')
            wait.until(EC.presence_of_element_located(retry))
            _screenshot(browser, tmp_path, "queues")
            _click(wait, retry)
            wait.until(EC.alert_is_present()).dismiss()  # asked first: dismissed, nothing changes
            assert client.count_jobs(queue="mail", status="dead") == 2
            _click(wait, retry)
            wait.until(EC.alert_is_present()).accept()
            wait.until(lambda _: client.count_jobs(queue="mail", status="ready") == 2)
            _click(wait, (By.CSS_SELECTOR, 'tr[data-queue="junk"] button[data-action="delete-dead"]'))
            wait.until(EC.alert_is_present()).accept()
            wait.until(lambda _: client.count_jobs(queue="junk") == 0)

            dead = next(iter(client.list_jobs(queues=["mail"])))
            browser.get(f"{base}#/jobs/{dead.id}")
            wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#errors details")))
            browser.find_element(By.CSS_SELECTOR, "#errors details summary").click()
            assert "line 7 in send" in browser.find_element(By.CSS_SELECTOR, "#errors pre.backtrace").text
            _screenshot(browser, tmp_path, "job")
            browser.get(f"{base}#/workers")
            wait.until(EC.presence_of_element_located((By.ID, "workers-table")))
            _screenshot(browser, tmp_path, "workers")
    finally:
        server.close()


def test_the_queues_page_charts_the_last_hour_per_queue_and_in_total_across_shards(tmp_path, browser) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    server = ServerProcess(tmp_path / "data", "--shards", "2").start()
    wait = WebDriverWait(browser, 30)
    try:
        with pyqueue.Client(server.address) as client:
            first, second = _one_queue_per_shard(client)
            client.enqueue_many([{"type": "send", "queue": first, "max_retries": 0}] * 6)
            client.enqueue_many([{"type": "send", "queue": second}] * 4)
            with client.take(first, prefetch=6) as stream:
                for i in range(6):
                    job = stream.next(timeout=30)
                    assert job is not None
                    job.ack() if i < 4 else job.fail("refused")

            history = client.history()  # the public API the charts read
            assert sum(history.queues[first].enqueued) == 6 and sum(history.queues[second].enqueued) == 4
            assert sum(history.queues[first].completed) == 4 and sum(history.queues[first].dead) == 2
            assert sum(history.total().enqueued) == 10
            assert sum(sum(step) for step in history.queues[first].waits) == 6  # one wait per take
            assert len(history.total().enqueued) == 360 and history.step_seconds == 10

            base = f"http://{server.http_address}/"
            with urllib.request.urlopen(f"{base}api/history?queue={first}", timeout=30) as answer:
                api = json.load(answer)
            assert round(sum(api["completed"]) * api["step_seconds"]) == 4
            assert any(p is not None for p in api["wait_p99"])

            browser.get(base)
            drawn = (By.CSS_SELECTOR, '#chart-throughput path[data-series="enqueued"]')
            wait.until(lambda b: b.find_element(*drawn).get_attribute("d"))
            assert {first, second} <= {
                o.get_attribute("value")
                for o in browser.find_elements(By.CSS_SELECTOR, "#chart-queue option")
            }
            _screenshot(browser, tmp_path, "queues-charts")
            Select(browser.find_element(By.ID, "chart-queue")).select_by_value(second)
            wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#chart-throughput h3"), second))
            # No job of the second queue was taken: its wait chart has no line, its enqueues do.
            assert not browser.find_element(
                By.CSS_SELECTOR, '#chart-latency path[data-series="p99"]'
            ).get_attribute("d")
            assert browser.find_element(
                By.CSS_SELECTOR, '#chart-throughput path[data-series="enqueued"]'
            ).get_attribute("d")
    finally:
        server.close()


def test_the_batches_page_shows_each_batch_s_progress_and_steers_its_workflow(tmp_path, browser) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    server = ServerProcess(tmp_path / "data", "--keep-dead", "3600").start()
    wait = WebDriverWait(browser, 30)
    try:
        with pyqueue.Client(server.address) as client:
            members = [
                pyqueue.Task({"type": "resize", "queue": "images", "max_retries": 0}) for _ in range(3)
            ]
            run = client.enqueue_workflow(
                pyqueue.Batch(
                    members, on_complete=pyqueue.Task({"type": "report", "queue": "mail"}), name="album"
                )
            )
            with client.take("images", prefetch=3) as stream:
                first, second = stream.next(timeout=30), stream.next(timeout=30)
                assert first is not None and second is not None
                first.ack()
                second.fail("unreadable")
            browser.get(f"http://{server.http_address}/#/batches")
            row = f'tr[data-batch="{run.batch_id}"]'
            wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, f'{row} td[data-count="dead"]'))
            wait.until(lambda b: b.find_element(By.CSS_SELECTOR, f'{row} td[data-count="dead"]').text == "1")
            cells = {
                name: browser.find_element(By.CSS_SELECTOR, f'{row} td[data-count="{name}"]').text
                for name in ("pending", "completed", "dead")
            }
            assert cells == {"pending": "1", "completed": "1", "dead": "1"}
            assert "album" in browser.find_element(By.CSS_SELECTOR, row).text

            # Retry the workflow's dead job, then cancel what has not run, each behind a question.
            _click(wait, (By.CSS_SELECTOR, f'{row} button[data-action="retry"]'))
            wait.until(EC.alert_is_present()).accept()
            wait.until(
                lambda _: (client.batch(run.batch_id).dead, client.batch(run.batch_id).pending) == (0, 2)
            )
            _click(wait, (By.CSS_SELECTOR, f'{row} button[data-action="cancel"]'))
            wait.until(EC.alert_is_present()).dismiss()  # dismissed: nothing changes
            assert not client.batch(run.batch_id).workflow_cancelled
            _click(wait, (By.CSS_SELECTOR, f'{row} button[data-action="cancel"]'))
            wait.until(EC.alert_is_present()).accept()
            wait.until(lambda _: client.batch(run.batch_id).workflow_cancelled)
            assert client.count_jobs(queue="images", status="cancelled") == 2
            wait.until(lambda b: not b.find_elements(By.CSS_SELECTOR, f"{row} button"))
            assert client.count_jobs(queue="mail") == 0, "no callback fired"
    finally:
        server.close()


def test_a_live_page_that_lost_its_server_says_so_and_recovers_by_itself(tmp_path, browser) -> None:  # type: ignore[no-untyped-def]
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    server = ServerProcess(tmp_path / "data").start()
    wait = WebDriverWait(browser, 30)
    try:
        http = server.http_address
        server.args[server.args.index("--http-listen") + 1] = http  # restarted where the page asks
        browser.get(f"http://{http}/#/workers")
        wait.until(EC.text_to_be_present_in_element((By.ID, "workers-table"), "no worker is connected"))

        server.stop()  # a deploy: the page's next refresh fails
        wait.until(lambda b: b.find_element(By.ID, "message").get_attribute("class") == "error")
        assert browser.find_element(By.ID, "message").text, "the page says why"

        server.restart()
        with pyqueue.Client(server.address) as client, client.take("mail"):
            _wait_for_this_worker(wait, browser, client)  # refreshed on its own, no reload
        assert browser.find_element(By.ID, "message").text == "", "the error is over"
    finally:
        server.close()


def test_the_keys_page_shows_a_queue_s_fair_keys_and_sets_a_weight(tmp_path, browser) -> None:  # type: ignore[no-untyped-def]
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    server = ServerProcess(tmp_path / "data").start()
    # The page redraws its rows every refresh: a row found just before a redraw is stale by the
    # time its text is read (seen under load), so a wait looks again, as for a row not there yet.
    wait = WebDriverWait(
        browser, 30, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
    )
    try:
        with pyqueue.Client(server.address) as client:
            for key in ["acme"] * 3 + ["tiny co"]:
                client.enqueue("report", queue="reports", fair_key=key)
            base = f"http://{server.http_address}/"
            browser.get(base)
            _click(wait, (By.CSS_SELECTOR, 'tr[data-queue="reports"] a.keys-link'))
            acme = (By.CSS_SELECTOR, 'tr[data-key="acme"] td[data-field="waiting"]')
            wait.until(EC.presence_of_element_located(acme))
            assert browser.find_element(*acme).text == "3"
            assert browser.find_element(By.ID, "key-count").text.startswith("2 keys")
            browser.find_element(By.ID, "weight-key").send_keys("tiny co")
            weight = browser.find_element(By.ID, "weight-value")
            weight.clear()
            weight.send_keys("5")
            _click(wait, (By.ID, "set-weight"))
            wait.until(EC.alert_is_present()).accept()
            wait.until(lambda _: client.fair_keys("reports").weights == {"tiny co": 5})
            shown = (By.CSS_SELECTOR, 'tr[data-key="tiny co"] td[data-field="weight"]')
            wait.until(lambda b: b.find_element(*shown).text == "5")
            _screenshot(browser, tmp_path, "keys")
    finally:
        server.close()
