"""A verdict no longer keeps the scorer's account of it step by step (`detail`): it was 1.7 KB a
verdict on average, 34 MB a scoring of 20,000 attempts, and most of what a re-score wrote. The
attempt's page scores the attempt again for it, against the scoring's key, and shows it only
where the scorer is the version that made the scoring and gives the stored verdict's figures
again (`records.scoring.run.account`). Dropping the column rewrites the verdict table on
SQLite, once; an existing database file keeps its size until it is vacuumed."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("records", "0016_verdict_detail_compressed_with_lz4")]

    operations = [migrations.RemoveField(model_name="verdict", name="detail")]
