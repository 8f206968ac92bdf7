"""The search index: an FTS5 virtual table on SQLite, a `tsvector` with a GIN index on
PostgreSQL (records.search.engine). Django's state holds a plain model of it, so a flush
empties it; the database holds the vendor's own table. Runs stored before are added by
`manage.py search_index`."""

from django.db import migrations, models

SQLITE = (
    "CREATE VIRTUAL TABLE records_searchentry USING fts5("
    "body, detail=none, tokenize='unicode61 remove_diacritics 0')"
)
POSTGRESQL = (
    "CREATE TABLE records_searchentry (id bigint PRIMARY KEY, body tsvector NOT NULL)",
    "CREATE INDEX records_searchentry_body ON records_searchentry USING gin (body)",
)


def _create(apps, schema_editor):
    connection = schema_editor.connection
    statements = (SQLITE,) if connection.vendor == "sqlite" else POSTGRESQL
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


def _drop(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("DROP TABLE records_searchentry")


class Migration(migrations.Migration):
    dependencies = [("records", "0010_published_records")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="SearchEntry",
                    fields=[
                        ("id", models.BigIntegerField(primary_key=True, serialize=False)),
                        ("body", models.TextField()),
                    ],
                    options={"db_table": "records_searchentry"},
                )
            ],
            database_operations=[migrations.RunPython(_create, _drop)],
        )
    ]
