"""The outbox's rows, in the table the SQLAlchemy outbox and the relay use (contrib/outbox_rows.py)."""

from django.db import models

from pyqueue.contrib.outbox_rows import TABLE


class OutboxRow(models.Model):  # type: ignore[misc]
    id = models.BigAutoField(primary_key=True)
    created_at = models.FloatField()  # epoch seconds: a delay counts from here
    spec = models.TextField()  # the job's spec as JSON
    refused = models.TextField(null=True)  # the server's reason, if it refused the job for good

    class Meta:
        db_table = TABLE
        ordering = ["id"]

    def __str__(self) -> str:
        return f"outbox row {self.pk}" + (" (refused)" if self.refused else "")
