"""PostgreSQL: a verdict's detail is compressed with lz4 rather than pglz, as the bulky columns
of a shard's rows are (0007).

A scoring writes one detail per attempt (1.7 KB on average, a third of them large enough to be
compressed): pglz took 0.1 s of the server's time per 20,000 verdicts, a sixth of their COPY.
Verdicts stored before keep their pglz values (both read alike). A server built without lz4
keeps pglz.
"""

from django.db import migrations

from records.bulk.tables import compressed_with_lz4

COLUMNS = {"records_verdict": ("detail",)}


class Migration(migrations.Migration):
    dependencies = [("records", "0015_search_calls_know_their_run")]

    operations = [compressed_with_lz4(COLUMNS)]
