from typing import Any

from django.db import migrations, models

from pyqueue.contrib import pg_notify
from pyqueue.contrib.outbox_rows import TABLE


def add_notify_trigger(apps: Any, schema_editor: Any) -> None:
    """On PostgreSQL, a commit that added rows wakes the relays (LISTEN/NOTIFY)."""
    if schema_editor.connection.vendor == "postgresql":
        for statement in pg_notify.install_statements(TABLE):
            schema_editor.execute(statement)


def drop_notify_trigger(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {pg_notify.FUNCTION} ON {pg_notify.quoted(TABLE)}")


class Migration(migrations.Migration):  # type: ignore[misc]
    initial = True
    dependencies: list[tuple[str, str]] = []
    operations = [
        migrations.CreateModel(
            name="OutboxRow",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("created_at", models.FloatField()),
                ("spec", models.TextField()),
                ("refused", models.TextField(null=True)),
            ],
            options={"db_table": TABLE, "ordering": ["id"]},
        ),
        migrations.RunPython(add_notify_trigger, drop_notify_trigger),
    ]
