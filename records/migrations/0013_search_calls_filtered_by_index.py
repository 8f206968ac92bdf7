"""The calls' filtered columns beside the search index (records.search.models.SearchCall), so
a query starts from the calls that match instead of every attempt of the store; filled here
for the runs stored before."""

import django.db.models.deletion
from django.db import migrations, models

FILL = (
    "INSERT INTO records_searchcall (id, attempt_id, tool, requested_action, dispatched_action,"
    " outcome, outcome_kind, observed, truncated) SELECT c.id, c.attempt_id, c.tool,"
    " c.requested_action, c.dispatched_action, c.outcome, CASE WHEN c.outcome LIKE 'refused:%'"
    " THEN 'refused' ELSE c.outcome END, c.dispatch_observed, c.result_truncated OR"
    " c.text_truncated FROM records_call c"
)


def _fill(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(FILL)


class Migration(migrations.Migration):
    dependencies = [("records", "0012_cases_figures_read_by_case_model_surface")]

    operations = [
        migrations.CreateModel(
            name="SearchCall",
            fields=[
                ("id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("tool", models.TextField()),
                ("requested_action", models.TextField()),
                ("dispatched_action", models.TextField()),
                ("outcome", models.TextField()),
                ("outcome_kind", models.TextField()),
                ("observed", models.BooleanField()),
                ("truncated", models.BooleanField()),
                (
                    "attempt",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="records.attempt",
                    ),
                ),
            ],
            options={
                "db_table": "records_searchcall",
                "indexes": [
                    models.Index(fields=["tool", "outcome_kind"], name="search_call_tool"),
                    models.Index(fields=["outcome_kind"], name="search_call_outcome"),
                    models.Index(fields=["requested_action"], name="search_call_requested"),
                    models.Index(fields=["dispatched_action"], name="search_call_dispatched"),
                ],
            },
        ),
        migrations.RunPython(_fill, migrations.RunPython.noop),
    ]
