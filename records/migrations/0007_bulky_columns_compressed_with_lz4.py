"""PostgreSQL: the bulky columns of a shard's rows are compressed with lz4 rather than pglz.

A large call result or turn is compressed as it is stored; pglz was an eighth of the server's
work in a bulk load, and lz4 does the same several times faster. Rows stored before keep their
pglz values (both read alike). A server built without lz4 keeps pglz.
"""

from django.db import migrations

from records.bulk.tables import compressed_with_lz4

COLUMNS = {
    "records_call": ("arguments", "result", "text"),
    "records_turn": ("blocks",),
    "records_attempt": ("stimulus", "facts"),
}


class Migration(migrations.Migration):
    dependencies = [("records", "0006_attempts_carry_what_the_scorer_reads")]

    operations = [compressed_with_lz4(COLUMNS)]
