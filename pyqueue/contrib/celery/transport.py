"""The kombu transport `pyqueue://`: Celery's broker on a pyqueue server (docs/celery.md).

A publish is a durable enqueue: the whole kombu message (headers, properties, body) is the job's
JSON payload, its type is the Celery task's name, its queue is where the exchange routes it, and
an `eta` (countdown) makes it a scheduled job that the server keeps, not the worker's memory.
Consumption is one Take stream per connection over the queues consumed (no polling), with
Celery's prefetch as the stream's; `ack`, `reject` and `requeue` are the stream's ack, fail
(dead, with its history) and release. A worker that dies holding a job loses its stream, and the
server gives the job to another worker: no visibility timeout.

Direct exchanges route (Celery's default): a routing key with no binding declared in this
process goes to the queue of that name, as a broker that keeps its bindings would. Remote control
(`celery inspect`, `celery control`, `revoke(terminate=True)`) is carried: a broadcast on a
mailbox's fanout exchange (`celery.pidbox`) is a job in the mailbox queue of every live worker the
server knows (its Take streams), or of the destinations named; each worker takes its mailbox on a
stream of its own, so that a control message never waits behind a full window of tasks; replies
go to the asker's reply queue. Events (`-E`) are carried the same way: each is a job in the queue
of every listener connected (`celery events`, Flower). Other topic exchanges are not carried.
"""

import base64
import copy
import json
import re
import threading
import time
from datetime import UTC, datetime
from queue import Empty
from typing import Any

from celery import current_app
from kombu.transport import virtual

from pyqueue import defaults
from pyqueue.client.calls import Call
from pyqueue.client.job import Job
from pyqueue.client.take import MultiTakeStream, TakeStream
from pyqueue.contrib.celery.calls import UnaryCalls
from pyqueue.errors import PermissionDenied, PyQueueError, Unauthenticated, Unavailable
from pyqueue.v1 import queue_pb2 as pb

DEFAULT_PORT = 7411
DEFAULT_PREFETCH = 10  # when Celery asks for no limit (prefetch 0)
CONTROL_PREFETCH = 10  # a worker's mailbox: its own window, beside the tasks'
_NOT_ROUTED = ("celeryev", "celery.pidbox")  # Celery's events and remote control: fanout, topic
_NOT_A_QUEUE_NAME = re.compile(r"[^A-Za-z0-9_.:\-]")


def server_queue(name: str) -> str:
    """A kombu queue's name on the server. Celery's mailbox queues hold the worker's name
    (`celery@host.celery.pidbox`), and a pyqueue queue name holds only letters, digits and _ . : -"""
    return _NOT_A_QUEUE_NAME.sub("_", name)


EVENTS = "celeryev"  # Celery's events exchange; a listener's queue is celeryev.ID
LISTENERS_FOR_S = 1.0  # how long the set of event listeners found on the server is used


def _is_control(queue: str) -> bool:
    """A mailbox queue (a worker's, an asker's reply queue) or an event listener's: remote
    control and monitoring, not tasks."""
    return queue.endswith(".pidbox") or queue.startswith(EVENTS + ".")


def message_job(queue: str, message: dict[str, Any]) -> dict[str, Any]:
    """The job spec of a kombu message published to `queue`."""
    headers = message.get("headers") or {}
    properties = message.get("properties") or {}
    if isinstance(message.get("body"), bytes):  # a binary serializer (pickle, msgpack)
        message["body"] = base64.b64encode(message["body"]).decode()
        properties["body_encoding"] = "base64"
    spec: dict[str, Any] = {
        "type": str(headers.get("task") or "kombu.message"),
        "queue": queue,
        "payload": message,
        "priority": defaults.PRIORITY - _priority(properties.get("priority")),
    }
    if headers.get("id"):  # the task's id finds its job (revoke); a retry is sent while it runs
        spec["unique_key"] = str(headers["id"])
        spec["unique_in_queue"] = True
    eta = headers.get("eta")
    if eta:
        when = datetime.fromisoformat(eta)
        spec["run_at"] = when if when.tzinfo else when.replace(tzinfo=UTC)
    return spec


def _priority(value: Any) -> int:
    """AMQP's order: 0 (the default) to 255, the higher first."""
    try:
        return max(0, min(255, int(value)))
    except (TypeError, ValueError):
        return 0


def job_message(job: Job, delivery_tag: str) -> dict[str, Any]:
    """The kombu message a job carries, as this delivery of it."""
    message: dict[str, Any] = job.payload
    message["properties"]["delivery_tag"] = delivery_tag
    message["properties"].setdefault("delivery_info", {})
    message["redelivered"] = job.attempts > 1
    return message


def revoke(server: UnaryCalls, task_ids: list[str]) -> None:
    """Cancel the jobs of these Celery tasks, wherever they are, and record them REVOKED."""
    queues = server.queue_names()
    for task_id in task_ids:
        for queue in queues:
            job = server.find(queue, task_id)
            if job is not None and job.status in ("scheduled", "ready", "in_flight"):
                server.change("CancelJobs", ids=[job.id])
    backend = current_app.backend
    if getattr(backend, "driver_type", None) == "pyqueue":
        for task_id in task_ids:
            backend.mark_as_revoked(task_id, reason="revoked")


class Channel(virtual.Channel):
    body_encoding = "utf-8"  # Celery's JSON bodies stay readable in the job's payload
    do_restore = False  # what is unacked at a close goes back through the server, not a republish

    connection: "Transport"

    supports_fanout = True  # a mailbox's broadcast reaches the workers of other processes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.no_ack_queues: set[str] = set()

    def basic_consume(self, queue: str, no_ack: bool, *args: Any, **kwargs: Any) -> Any:
        if no_ack:  # nothing will ack these: the transport does at delivery
            self.no_ack_queues.add(queue)
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    def basic_cancel(self, consumer_tag: str) -> Any:
        self.no_ack_queues.discard(self._tag_to_queue.get(consumer_tag, ""))
        return super().basic_cancel(consumer_tag)

    def basic_publish(self, message: dict[str, Any], exchange: str, routing_key: str, **kwargs: Any) -> Any:
        if exchange == EVENTS:  # a topic that every listener hears, in whichever process it is
            return self.connection.publish_event(message)
        return super().basic_publish(message, exchange, routing_key, **kwargs)

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        self.connection.server().enqueue([message_job(server_queue(queue), message)])

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        pass  # a mailbox's queues are found from the live workers' streams, not kept

    def _put_fanout(self, exchange: str, message: dict[str, Any], routing_key: str, **kwargs: Any) -> None:
        if exchange.endswith(".pidbox"):
            self.connection.broadcast(exchange, message)
        else:  # a fanout exchange of the app's own: the queues bound in this process
            for queue in self._lookup(exchange, routing_key):
                self._put(queue, copy.deepcopy(message))

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        raise Empty()  # jobs come on the Take stream (Transport.drain_events), never by polling

    def _size(self, queue: str) -> int:
        return self.connection.server().count(queues=[server_queue(queue)], statuses=["ready", "scheduled"])

    def _purge(self, queue: str) -> int:
        return self.connection.server().change(
            "DeleteJobs", queues=[server_queue(queue)], statuses=["ready", "scheduled"]
        )

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        pass  # a pyqueue queue exists as soon as a job names it

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        return True

    def _delete(self, queue: str, *args: Any, **kwargs: Any) -> None:
        self._purge(queue)

    def _lookup(self, exchange: str, routing_key: str, default: Any = None) -> list[str]:
        queues: list[str] = super()._lookup(exchange, routing_key, default)
        if queues or exchange in _NOT_ROUTED or self.typeof(exchange).type != "direct":
            return queues
        if exchange.startswith("reply.") and exchange.endswith(".pidbox"):  # kombu's Mailbox names
            return [f"{routing_key}.{exchange}"]  # the asker's reply queue so, bound by its id
        return [routing_key or exchange]

    def basic_ack(self, delivery_tag: str, multiple: bool = False) -> None:
        super().basic_ack(delivery_tag)
        self.connection.answer(delivery_tag, "ack")

    def basic_reject(self, delivery_tag: str, requeue: bool = False) -> None:
        self.qos.ack(delivery_tag)  # no longer this channel's, and never republished
        self.connection.answer(delivery_tag, "release" if requeue else "reject")

    def _restore(self, message: Any) -> None:  # basic_recover(requeue=True): hand it back
        self.connection.answer(message.delivery_tag, "release")


class Transport(virtual.Transport):
    Channel = Channel
    driver_type = driver_name = "pyqueue"
    default_port = DEFAULT_PORT  # type: ignore[assignment]
    polling_interval = None  # type: ignore[assignment]  # drain_events blocks on the stream
    implements = virtual.Transport.implements.extend(
        asynchronous=False, exchange_type=frozenset(["direct", "fanout", "topic"]), heartbeats=False
    )
    connection_errors = (Unavailable, OSError)  # type: ignore[assignment]
    channel_errors = (PyQueueError,)

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self._server: UnaryCalls | None = None
        self._lock = threading.Lock()
        self._stream: TakeStream | MultiTakeStream | None = None
        self._subscribed: tuple[tuple[str, ...], int, tuple[str, ...]] = ((), 0, ())
        self._held: dict[str, Job] = {}  # by delivery tag: delivered, not answered yet
        self._kombu_names: dict[str, str] = {}  # a queue's name on the server: kombu's
        self._listeners: tuple[float, list[str]] = (float("-inf"), [])  # (found at, queues)

    # The server.
    def server(self) -> UnaryCalls:
        with self._lock:
            if self._server is None:
                conninfo = self.client
                assert conninfo is not None
                address = f"{conninfo.hostname or '127.0.0.1'}:{conninfo.port or DEFAULT_PORT}"
                options = conninfo.transport_options or {}
                token = conninfo.password or options.get("token")
                self._server = UnaryCalls(address, token=token, tls=options.get("tls"))
            return self._server

    def establish_connection(self) -> Any:
        try:
            self.server().run(Call("GetTopology", pb.TopologyRequest(), lambda answer: answer))
        except (PermissionDenied, Unauthenticated) as exc:  # reachable, and the token is known
            raise PyQueueError(f"the pyqueue server refused this broker URL: {exc}") from exc
        return super().establish_connection()

    def close_connection(self, connection: Any) -> None:
        super().close_connection(connection)
        with self._lock:
            stream, self._stream = self._stream, None
            server, self._server = self._server, None
        if stream is not None:
            stream.close()  # jobs delivered and not answered go back to their queues
        if server is not None:
            server.close()

    def broadcast(self, exchange: str, message: dict[str, Any]) -> None:
        """A mailbox's broadcast: a job in the mailbox queue of each live worker (the
        destinations', if named). A `revoke` also cancels the tasks' jobs on the server where
        they wait, so that a task revoked while no worker runs never starts."""
        try:
            command = json.loads(message["body"])
        except (TypeError, ValueError):
            command = {}
        if command.get("method") == "revoke":
            task_ids = command.get("arguments", {}).get("task_id") or []
            revoke(self.server(), [task_ids] if isinstance(task_ids, str) else list(task_ids))
        suffix = "." + exchange  # kombu's Mailbox: a worker's queue is NAME.EXCHANGE
        mailboxes = {q for q in self.server().worker_queues() if q.endswith(server_queue(suffix))}
        if command.get("destination"):
            mailboxes &= {server_queue(name + suffix) for name in command["destination"]}
        if mailboxes:
            self.server().enqueue([message_job(q, copy.deepcopy(message)) for q in sorted(mailboxes)])

    def publish_event(self, message: dict[str, Any]) -> None:
        """An event (`-E`): a job in the queue of each listener connected to the server
        (`celery events`, Flower), none if nobody listens. Listeners bind every routing key
        (`#`), so the routing key does not choose among them."""
        found_at, listeners = self._listeners
        if time.monotonic() - found_at > LISTENERS_FOR_S:
            prefix = EVENTS + "."
            listeners = sorted(q for q in self.server().worker_queues() if q.startswith(prefix))
            self._listeners = (time.monotonic(), listeners)
        if listeners:
            self.server().enqueue([message_job(q, copy.deepcopy(message)) for q in listeners])

    # Consuming.
    def _wanted(self) -> tuple[tuple[str, ...], int, tuple[str, ...]]:
        """The task queues consumed, their prefetch, and the mailbox queues consumed (on a
        subscription of their own): a change opens the stream anew at the next drain, once
        nothing taken on the old one is unanswered."""
        consumed = {q for channel in self.channels for q in channel._active_queues}
        self._kombu_names = {server_queue(q): q for q in consumed}
        counts = [channel.qos.prefetch_count for channel in self.channels if channel._active_queues]
        prefetch = max(counts, default=0)
        tasks = tuple(sorted(server_queue(q) for q in consumed if not _is_control(q)))
        control = tuple(sorted(server_queue(q) for q in consumed if _is_control(q)))
        return tasks, prefetch or DEFAULT_PREFETCH, control

    def _consuming(self) -> TakeStream | MultiTakeStream | None:
        if self._stream is not None and self._stream.server_stopping:
            # The server is going away: the jobs taken here are still answered on this stream
            # (each job keeps it), and the next one comes on a stream to the server that is back.
            self._stream, self._subscribed = None, ((), 0, ())
        wanted = self._wanted()
        if self._stream is None or (wanted != self._subscribed and not self._held):
            if self._stream is not None:
                self._stream.close()
                self._stream = None
            self._subscribed = wanted
            tasks, prefetch, control = wanted
            subscriptions = [(list(tasks), prefetch)] if tasks else []
            subscriptions += [(list(control), CONTROL_PREFETCH)] if control else []
            client = self.server().grpc()
            if len(subscriptions) == 1:
                self._stream = client.take(subscriptions[0][0], prefetch=subscriptions[0][1])
            elif subscriptions:
                self._stream = client._take_joined(subscriptions)
        return self._stream

    def _no_ack(self, queue: str) -> bool:
        return any(queue in channel.no_ack_queues for channel in self.channels)

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> None:
        stream = self._consuming()
        if stream is None:
            raise TimeoutError()
        try:
            job = stream.next(timeout=timeout)
        except Unavailable:  # Celery reconnects: the server gives the jobs held here to others
            self._stream, self._subscribed = None, ((), 0, ())
            self._held.clear()
            raise
        if job is None:
            raise TimeoutError()
        tag = f"{job.id}.{job.lease}"
        self._held[tag] = job
        queue = self._kombu_names.get(job.queue, job.queue)
        self._deliver(job_message(job, tag), queue)
        if self._no_ack(queue):  # a mailbox's consumer: taken is done
            self.answer(tag, "ack")

    def answer(self, delivery_tag: str, how: str) -> None:
        job = self._held.pop(delivery_tag, None)
        if job is None:
            return  # from a stream that ended: the server has given that job out again
        try:
            if how == "ack":
                job.ack(wait=False)
            elif how == "release":
                job.release()
            else:
                job.fail("rejected by the Celery worker (requeue=False)", kill=True, wait=False)
        except Unavailable:
            pass  # the stream ended: the job goes back to its queue on the server
