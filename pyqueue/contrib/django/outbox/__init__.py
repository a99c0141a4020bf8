"""The transactional outbox for Django: add "pyqueue.contrib.django.outbox" to INSTALLED_APPS and
migrate. An enqueue through it is one INSERT on the database connection, so inside
`transaction.atomic()` it commits or rolls back with the request's own writes:

    from pyqueue.contrib.django.outbox import outbox

    with transaction.atomic():
        order = Order.objects.create(...)
        outbox.enqueue(send_receipt, order.pk)              # an @app.job function, its arguments
        outbox.enqueue_spec({"type": "billing.sync", "payload": {"order": order.pk}})

The table is the one `pyqueue.contrib.outbox` (SQLAlchemy) writes, so the same relay moves its
rows: `pyqueue relay --database URL-OF-THE-SAME-DATABASE` (docs/outbox.md). Django tasks go this
way with the backend's "OUTBOX" option (pyqueue.contrib.django.backend).
"""

from collections.abc import Mapping
from typing import Any

from pyqueue.app import BoundJob, JobFunction
from pyqueue.contrib.outbox_rows import job_spec, row_values


class Outbox:
    def __init__(self, using: str = "default") -> None:
        self.using = using  # the database alias whose connection (and transaction) takes the rows

    def enqueue(self, job: JobFunction[Any, Any] | BoundJob[Any, Any], *args: Any, **kwargs: Any) -> Any:
        """Add a call of `job` to the current transaction; the row."""
        return self.enqueue_spec(job_spec(job, args, kwargs))

    def enqueue_spec(self, spec: Mapping[str, Any]) -> Any:
        """Add a job given as a spec (as for Client.enqueue_many); the row."""
        from pyqueue.contrib.django.outbox.models import OutboxRow

        return OutboxRow.objects.using(self.using).create(**row_values(spec))

    async def aenqueue(
        self, job: JobFunction[Any, Any] | BoundJob[Any, Any], *args: Any, **kwargs: Any
    ) -> Any:
        return await self.aenqueue_spec(job_spec(job, args, kwargs))

    async def aenqueue_spec(self, spec: Mapping[str, Any]) -> Any:
        from pyqueue.contrib.django.outbox.models import OutboxRow

        return await OutboxRow.objects.using(self.using).acreate(**row_values(spec))


outbox = Outbox()
