"""SQLite's write-ahead-log checkpoints, run beside the next piece of work instead of on the
commit's path."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

from django.conf import settings
from django.db import connection

from records.bulk import processes


class Checkpoints:
    """SQLite keeps a large write's pages (a shard's, a scoring's) in its write-ahead log until
    a checkpoint copies them into the database file and syncs it. Left to SQLite, that happens
    at the commit, on the caller's path; here the commit skips it, and the checkpoint runs on
    its own connection beside what comes next (the next shard's parse, the next run's scoring);
    an ingest call and the commands that score wait for the last one (`finish`), so they
    return with the log checkpointed as before. A commit is as durable either way (WAL with
    synchronous=NORMAL): the checkpoint only moves pages into place."""

    def applies(self) -> bool:
        name = str(connection.settings_dict.get("NAME") or "")
        return (
            connection.vendor == "sqlite"
            and not connection.in_atomic_block
            and name not in ("", ":memory:")
            and not name.startswith("file:")
        )

    @contextmanager
    def deferred(self, large: bool) -> Iterator[None]:
        """Around a write's transaction: a large one's commit is checkpointed beside."""
        if not (large and self.applies()):
            yield
            return
        with connection.cursor() as cur:
            cur.execute("PRAGMA wal_autocheckpoint")
            (every,) = cur.fetchone()
            cur.execute("PRAGMA wal_autocheckpoint = 0")
        try:
            yield
        finally:
            with connection.cursor() as cur:
                cur.execute(f"PRAGMA wal_autocheckpoint = {int(every)}")
        # Committed (an error would not come here): one checkpoint at a time.
        processes.settle()
        path = str(connection.settings_dict["NAME"])
        processes.in_background(lambda: _checkpoint(path))

    def finish(self) -> None:
        """Wait for the checkpoint under way."""
        processes.settle()


def _checkpoint(path: str) -> None:

    # mode=rw: a database file that is gone (deleted meanwhile) is not created afresh.
    db = sqlite3.connect(
        f"file:{quote(path)}?mode=rw",
        uri=True,
        timeout=settings.DATABASES["default"]["OPTIONS"]["timeout"],
    )
    try:
        db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    finally:
        db.close()


checkpoints = Checkpoints()
