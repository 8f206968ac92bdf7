from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection

# The command's options: flag, type (bool for a switch), default, and what it sets.
OPTIONS = (
    ("--small", int, 10_000, "attempts in the small run"),
    ("--large", int, 100_000, "attempts in the large run"),
    ("--artifact-mb", float, 200, "MB of shards to zip"),
    ("--out", str, "bench-report.json", "where to write the JSON"),
    ("--keep-db", bool, False, "keep the bench database"),
    ("--db-name", str, "evaldash_bench", "the PostgreSQL database to make and drop"),
    ("--corpus-only", bool, False, "only the corpus and case pages (--corpus-runs, -attempts)"),
    ("--corpus-runs", int, 50, "runs for the corpus pages"),
    ("--corpus-attempts", int, 20_000, "attempts per corpus-page run"),
    ("--search", bool, False, "measure the search's targets instead"),
    ("--upload", bool, False, "time a POST of --upload-mb MB to the production server"),
    ("--upload-mb", float, 200, "MB the upload sends"),
    ("--slow-clients", bool, False, "count the slow clients the production server survives"),
    ("--scaling", bool, False, "the ingest with the key stored on one core, then on all"),
    ("--keyed-only", bool, False, "only the ingest with the key stored (what --scaling runs)"),
    ("--runs", int, 10, "runs in the search's store"),
    ("--attempts", int, 20_000, "attempts per run in the search's store"),
)


class Command(BaseCommand):
    help = "Measure ingest against its floor, peak memory, scoring and page times on fresh data."

    def add_arguments(self, parser) -> None:
        for flag, kind, default, text in OPTIONS:
            if kind is bool:
                parser.add_argument(flag, action="store_true", help=text)
            else:
                parser.add_argument(flag, type=kind, default=default, help=text)

    def handle(
        self,
        *args,
        small: int,
        large: int,
        artifact_mb: float,
        out: str,
        keep_db: bool,
        db_name: str,
        corpus_only: bool,
        corpus_runs: int,
        corpus_attempts: int,
        search: bool,
        runs: int,
        attempts: int,
        upload: bool,
        upload_mb: float,
        slow_clients: bool,
        scaling: bool,
        keyed_only: bool,
        **options,
    ) -> None:
        # Imported when the benchmark runs, not when `manage.py help` loads every command.
        from records.devtools import bench

        if scaling:  # each measurement a fresh process on a database of its own
            self._scaling(bench, large, db_name, Path(out))
            return

        # A fresh database, made and destroyed the way the test runner does it.
        test = settings.DATABASES["default"].setdefault("TEST", {})
        if connection.vendor == "sqlite":
            test["NAME"] = str(Path(settings.BASE_DIR) / "var" / "bench.sqlite3")
        else:
            test["NAME"] = db_name
        old_name = settings.DATABASES["default"]["NAME"]
        connection.creation.create_test_db(verbosity=0, autoclobber=True)
        try:
            if upload:
                self._upload(bench, upload_mb, Path(out))
                return
            if slow_clients:
                report = bench.slow_clients(out=Path(out), say=lambda s: self.stderr.write(s))
                self.stdout.write(
                    f"bench slow clients ({report['database']}): the production command alone "
                    f"answers beside up to {report['survives_up_to']} slow clients; report in {out}"
                )
                return
            if search:
                self._search(bench, runs, attempts, Path(out))
                return
            if keyed_only:
                report = bench.keyed(large=large, out=Path(out), say=self.stderr.write)
                self.stdout.write(
                    f"bench ({report['database']}, {report['cores']} core(s)): ingest with the "
                    f"key stored {report['ingest_with_key']['ratio_lines']:.2f}x the floor; "
                    f"report in {out}"
                )
                return
            if corpus_only:
                report = bench.corpus_only(
                    runs=corpus_runs,
                    attempts=corpus_attempts,
                    out=Path(out),
                    say=lambda s: self.stderr.write(s),
                )
                pages = report["corpus_pages"]["pages"]
                self.stdout.write(
                    f"bench ({report['database']}): over {corpus_runs} runs x "
                    f"{corpus_attempts:,} attempts, corpus page "
                    f"{pages['corpus page']['median_ms']:.0f} ms "
                    f"({pages['corpus page']['queries']} queries), case page "
                    f"{pages['case page']['median_ms']:.0f} ms "
                    f"({pages['case page']['queries']} queries), failure modes "
                    f"{pages['failure modes']['median_ms']:.0f} ms "
                    f"({pages['failure modes']['queries']} queries); report in {out}"
                )
                return
            report = bench.run(
                small=small,
                large=large,
                artifact_mb=artifact_mb,
                out=Path(out),
                say=lambda s: self.stderr.write(s),
            )
        finally:
            if not keep_db:
                connection.creation.destroy_test_db(old_name, verbosity=0)
        r = report["ratios"]
        self.stdout.write(
            f"bench ({report['database']}): ingest with the key stored "
            f"{r['ingest_with_key_over_floor']:.2f}x the floor, without scoring "
            f"{r['ingest_without_scoring_over_floor']:.2f}x; indexed after it, done at "
            f"{r['index_done_over_floor_time']:.2f}x the floor's time (the index "
            f"{r['index_seconds_with_key']:.2f} s, {r['index_after_over_floor_time']:.2f}x the "
            f"floor's time after the shards); re-score of "
            f"{r['rescore_attempts']:,} attempts {r['rescore_seconds']:.2f} s = "
            f"{r['rescore_attempts_per_s']:,.0f} attempts/s (then the log's checkpoint "
            f"{r['rescore_checkpoint_seconds']:.2f} s); peak "
            f"{report['peak_memory']['max_rss_mb']:.0f} MB; report in {out}"
        )
        if r["ingest_with_key_bound"] and r["ingest_without_scoring_bound"]:
            self.stdout.write(
                f"  their CPU time allows at most, on {r['cores']} core(s): "
                f"{r['ingest_with_key_bound']:.2f}x, {r['ingest_without_scoring_bound']:.2f}x "
                f"and {r['rescore_seconds_bound']:.2f} s"
            )

    def _search(self, bench, runs: int, attempts: int, out: Path) -> None:
        report = bench.search(
            runs=runs, attempts=attempts, out=out, say=lambda s: self.stderr.write(s)
        )
        every = report["search, every run"]
        slowest = max(every.items(), key=lambda item: item[1]["median_ms"])
        size = report["size, every run"]
        exports = "; ".join(
            f"/search.csv {name} {e['rows']:,} rows at {e['rows_per_s']:,.0f}/s"
            for name, e in report["exports"].items()
            if name != "store"
        )
        self.stdout.write(
            f"bench search ({report['database']}, {runs} x {attempts:,} attempts): ingest "
            f"{report['ingest']['ratio_lines']:.2f}x the floor; slowest {slowest[0]} "
            f"{slowest[1]['median_ms']:.0f} ms; store {size['bytes'] / 1e6:,.0f} MB, index "
            f"{(size['index_bytes'] or 0) / 1e6:,.0f} MB; {exports}; report in {out}"
        )

    def _scaling(self, bench, large: int, db_name: str, out: Path) -> None:
        report = bench.scaling(large=large, db_name=db_name, out=out, say=self.stderr.write)
        one, every = report["one_core"], report["all_cores"]
        self.stdout.write(
            f"bench scaling ({report['database']}): the ingest with the key stored, "
            f"{one['seconds']:.2f} s on 1 core ({one['ratio']:.2f}x its floor), "
            f"{every['seconds']:.2f} s on {every['cores']} ({every['ratio']:.2f}x): "
            f"{report['speedup']:.2f}x from the cores; report in {out}"
        )

    def _upload(self, bench, mb: float, out: Path) -> None:
        report = bench.upload(mb=mb, out=out, say=lambda s: self.stderr.write(s))
        a, d = report["answer"], report["done"]
        self.stdout.write(
            f"bench upload ({report['database']}, {a['bytes'] / 1e6:.0f} MB): {a['status']} in "
            f"{a['seconds']:.2f} s = {a['over_disk_write']:.2f}x the disk write; server worker "
            f"peak {a['server_worker_max_rss_mb']:.0f} MB; done {d['seconds_after_answer']:.1f} s "
            f"later = {d['over_inline_ingest_plus_pickup']:.2f}x (inline ingest + pick-up); "
            f"report in {out}"
        )
