"""The search's outbox (`records.search.models.PendingIndex`): a run stored and not yet
indexed. The index is written after the shard's transaction, by a follow-up that the row queues
in it; runs stored before this have their index already, so none is written here."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("records", "0021_hardening"),
    ]

    operations = [
        migrations.CreateModel(
            name="PendingIndex",
            fields=[
                (
                    "run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="pending_index",
                        serialize=False,
                        to="records.run",
                    ),
                ),
                ("queued_at", models.DateTimeField(auto_now_add=True)),
                ("worker", models.CharField(blank=True, default="", max_length=200)),
                ("tries", models.PositiveIntegerField(default=0)),
                ("error", models.TextField(blank=True, default="")),
            ],
            options={
                "db_table": "records_pendingindex",
            },
        ),
    ]
