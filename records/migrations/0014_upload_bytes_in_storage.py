"""An upload's bytes wait in the uploads storage (STORAGES["uploads"]), named on its row, instead
of in chunk rows; the bytes of uploads still waiting are moved there first."""

from django.db import migrations, models


def chunks_to_storage(apps, schema_editor):
    import secrets
    import tempfile

    from django.core.files import File
    from django.core.files.storage import storages

    Upload = apps.get_model("records", "Upload")
    PendingChunk = apps.get_model("records", "PendingChunk")
    storage = storages["uploads"]
    waiting = PendingChunk.objects.values_list("upload_id", flat=True).distinct()
    for upload in Upload.objects.filter(pk__in=list(waiting)):
        prefix = f"migrated-{upload.pk}-{secrets.token_hex(4)}"
        chunks = PendingChunk.objects.filter(upload=upload)
        kept = []
        for index, name in chunks.values_list("file", "name").distinct().order_by("file"):
            with tempfile.TemporaryFile() as tmp:  # one chunk at a time in memory
                rows = chunks.filter(file=index).order_by("seq").values_list("data", flat=True)
                for data in rows.iterator(chunk_size=1):
                    tmp.write(bytes(data))
                size = tmp.tell()
                tmp.seek(0)
                stored = storage.save(f"{prefix}/{index:03d}", File(tmp))
            kept.append({"name": name, "stored": stored, "size": size})
        upload.files = kept
        upload.save(update_fields=["files"])


class Migration(migrations.Migration):
    dependencies = [
        ("records", "0013_search_calls_filtered_by_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="upload",
            name="files",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(chunks_to_storage, migrations.RunPython.noop),
        migrations.RemoveConstraint(
            model_name="pendingchunk",
            name="pending_chunk_once",
        ),
        migrations.DeleteModel(
            name="PendingChunk",
        ),
    ]
