"""Each call the search filters (records.search.models.SearchCall) knows its run, and the
indexes read by it, so a call condition narrowed to runs reads their calls alone instead of the
matching calls of the whole store; filled here from the attempts for the calls stored before."""

import django.db.models.deletion
from django.db import migrations, models

# A searched call whose attempt is gone (its run deleted without its entries) has no run to
# know: it is dropped, as its run's deletion would have dropped it.
DROP_ORPHANS = (
    "DELETE FROM records_searchcall WHERE NOT EXISTS (SELECT 1 FROM records_attempt a"
    " WHERE a.id = records_searchcall.attempt_id)"
)
FILL = (
    "UPDATE records_searchcall SET run_id = (SELECT a.run_id FROM records_attempt a"
    " WHERE a.id = records_searchcall.attempt_id)"
)


def _fill(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(DROP_ORPHANS)
        cursor.execute(FILL)


class Migration(migrations.Migration):
    dependencies = [("records", "0014_upload_bytes_in_storage")]

    operations = [
        migrations.RemoveIndex(model_name="searchcall", name="search_call_outcome"),
        migrations.RemoveIndex(model_name="searchcall", name="search_call_requested"),
        migrations.RemoveIndex(model_name="searchcall", name="search_call_dispatched"),
        migrations.AddField(
            model_name="searchcall",
            name="run",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                default=0,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="records.run",
            ),
            preserve_default=False,
        ),
        migrations.RunPython(_fill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="searchcall",
            index=models.Index(fields=["run", "tool", "outcome_kind"], name="search_call_run"),
        ),
        migrations.AddIndex(
            model_name="searchcall",
            index=models.Index(fields=["outcome_kind", "run"], name="search_call_outcome"),
        ),
        migrations.AddIndex(
            model_name="searchcall",
            index=models.Index(fields=["requested_action", "run"], name="search_call_requested"),
        ),
        migrations.AddIndex(
            model_name="searchcall",
            index=models.Index(fields=["dispatched_action", "run"], name="search_call_dispatched"),
        ),
    ]
