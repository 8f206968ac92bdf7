"""The benchmark runs on a tiny size and writes its report (no timing is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command


@pytest.mark.django_db(transaction=True)
def test_the_benchmark_runs_on_a_tiny_size_and_writes_its_report(tmp_path, capsys):
    out = tmp_path / "bench.json"
    call_command(
        "bench", "--small", "60", "--large", "120", "--artifact-mb", "0.5", "--out", str(out)
    )
    report = json.loads(out.read_text())
    assert report["ingest"]["floor"]["lines"] == report["ingest"]["evaldash"]["lines"] > 0
    assert report["scoring"]["attempts"] > 0
    # The ingest with the key stored is measured against its own floor over the same shards.
    keyed = report["ingest_with_key"]
    assert (
        keyed["floor"]["lines"] == keyed["evaldash"]["lines"] > report["ingest"]["floor"]["lines"]
    )
    ratios = report["ratios"]
    assert ratios["ingest_with_key_over_floor"] == keyed["ratio_lines"] > 0
    assert ratios["ingest_without_scoring_over_floor"] == report["ingest"]["ratio_lines"] > 0
    assert ratios["rescore_attempts"] == report["scoring_large"]["attempts"] > 0
    assert ratios["rescore_attempts_per_s"] > 0
    # The index after the shards, both ways: the whole call, and the index alone, each against
    # the floor's time.
    floor_seconds = keyed["floor"]["seconds"]
    assert ratios["index_done_over_floor_time"] == pytest.approx(
        keyed["evaldash"]["index_done_seconds"] / floor_seconds
    )
    assert ratios["index_after_over_floor_time"] == pytest.approx(
        ratios["index_seconds_with_key"] / floor_seconds
    )
    assert ratios["index_after_over_floor_time"] < ratios["index_done_over_floor_time"]
    # The re-score's figure is the median of its timed re-scores, each kept.
    each = report["scoring_large"]["seconds_each"]
    assert len(each) == 3 and ratios["rescore_seconds"] == sorted(each)[1]
    # Beside each, what its CPU time allows: the floor's time over that CPU time spread over
    # every core (0 CPU time read where /proc is missing would divide by zero: skipped there).
    if Path("/proc/self/stat").exists():
        for measured in (keyed, report["ingest"]):
            cpu = measured["evaldash"]["cpu_seconds"]
            # The tiny floor may take less than the kernel's 10 ms tick, the ingest never.
            assert cpu > 0 and measured["floor"]["cpu_seconds"] >= 0
            assert measured["ratio_bound"] == pytest.approx(
                measured["cores"] * measured["floor"]["seconds"] / cpu
            )
        assert ratios["ingest_with_key_bound"] == keyed["ratio_bound"]
        assert ratios["rescore_seconds_bound"] == pytest.approx(
            report["scoring_large"]["cpu_seconds"] / ratios["cores"]
        )
    for page in (
        "runs list",
        "run overview (ranked boards)",
        "run scores tab",
        "run attempts tab, drilled",
        "scores comparison of two runs",
        "models side by side",
        "row history",
        "case matrix",
        "attempt trace",
    ):
        assert report["page_growth"][page]["queries_small"] > 0
    assert report["peak_memory"]["max_rss_mb"] > 0
    if Path("/proc/self/smaps_rollup").exists():
        mem = report["peak_memory"]
        assert mem["peak_tree_pss_mb"] > 0
        # The ingest process's own peak, which the kernel's figure (carried over from the
        # process that started it) can only exceed.
        assert 0 < mem["ingest_process_max_rss_mb"] <= mem["kernel_max_rss_mb"]
        assert mem["max_rss_mb"] >= mem["ingest_process_max_rss_mb"]
    printed = capsys.readouterr().out
    assert "bench (" in printed and "ingest with the key stored" in printed
    assert "without scoring" in printed and "attempts/s" in printed
    assert "their CPU time allows at most" in printed


@pytest.mark.django_db(transaction=True)
def test_the_search_benchmark_runs_on_a_tiny_store_and_reports_its_ingest(tmp_path, capsys):
    out = tmp_path / "search.json"
    call_command("bench", "--search", "--runs", "3", "--attempts", "40", "--out", str(out))
    report = json.loads(out.read_text())
    ingest = report["ingest"]
    assert ingest["evaldash"]["lines"] == ingest["floor"]["lines"] > 0
    assert 0 < ingest["ratio_lines"] < ingest["ratio_lines_without_index"]
    if Path("/proc/self/stat").exists():
        cpu = ingest["evaldash"]["cpu_seconds"]
        assert cpu > 0
        assert ingest["ratio_bound"] == pytest.approx(
            ingest["cores"] * ingest["floor"]["seconds"] / cpu
        )
    assert report["search, every run"] and report["size, every run"]
    # The whole store's exports: an attempt a row, then a row a matching call.
    exports = report["exports"]
    assert exports["every attempt"]["rows"] == 3 * 40
    assert exports["observed calls"]["rows"] == exports["store"]["observed_calls"] > 0
    assert exports["text 'the'"]["rows"] > 0 and exports["text 'the'"]["rows_per_s"] > 0
    assert "/search.csv observed calls" in capsys.readouterr().out


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="Linux only")
@pytest.mark.django_db
def test_the_scaling_benchmark_runs_the_keyed_ingest_on_one_core_then_on_all(tmp_path, capsys):
    """`--scaling`: two fresh benchmark processes, the first held to one core (and so one parser
    process), the second on every core; the gain is of their ratios to their own floors."""
    import os

    from records.devtools.bench import database_server_pid, process_tree

    # A PostgreSQL server here is held to the one core while the ingest runs on it, and its
    # processes have their own cores back after.
    server = database_server_pid()
    before = {pid: os.sched_getaffinity(pid) for pid in process_tree(server)} if server else {}
    out = tmp_path / "scaling.json"
    call_command("bench", "--scaling", "--large", "60", "--out", str(out))
    report = json.loads(out.read_text())
    one, every = report["one_core"], report["all_cores"]
    assert (one["cores"], one["processes"]) == (1, 1)
    assert every["server_held"] is False and isinstance(one["server_held"], bool)
    if server is None:  # SQLite, or a server elsewhere
        assert one["server_held"] is False
    for pid, cores in before.items():
        try:
            assert os.sched_getaffinity(pid) == cores
        except ProcessLookupError:
            pass  # a backend that ended meanwhile
    assert every["cores"] >= 1 and every["processes"] == len(os.sched_getaffinity(0))
    assert report["speedup"] == pytest.approx(every["ratio"] / one["ratio"])
    assert one["seconds"] > 0 and every["seconds"] > 0
    assert "from the cores" in capsys.readouterr().out
