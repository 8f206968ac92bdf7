"""Intake under hostile input: tar metadata read within bounds, every archive entry counted,
stored names cut short, every /api/ answer JSON (errors included), and slow clients that do not
hold the server."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from records.models import Run, ShardFile, Upload
from tests.builders import ingest_bytes

GOOD = (Path(__file__).parent / "fixtures" / "modelrecord" / "modeleval-dynamic.jsonl").read_bytes()
HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
MAX_TAR_HEADER_BYTES = 64 * 1024  # records.ingest.archives.MAX_TAR_HEADER_BYTES
NAME_CHARS = 300  # records.ingest.inputs.NAME_CHARS


def _tar(*members: tuple[tarfile.TarInfo, bytes], **options) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", compresslevel=1, **options) as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _dir(name: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info, b""


def _summary_chars() -> int:
    return len(json.dumps(Upload.objects.get().summary))


# --- Tar metadata is read within bounds ------------------------------------------------------


@pytest.mark.django_db
def test_it_refuses_a_pax_header_over_the_bound_unread_and_stores_nothing_of_the_archive():
    # A name of 8 MB travels in a pax extended header (tarfile writes one for a long name).
    long = "d" * (8 * 1024 * 1024) + "/modeleval-a.jsonl"
    data = _tar((tarfile.TarInfo(long), GOOD), format=tarfile.PAX_FORMAT)
    report = ingest_bytes(("artifact.tar.gz", data), ("modeleval-good.jsonl", GOOD))
    (refused,) = report.refused
    assert refused["file"] == "artifact.tar.gz"
    assert "a pax extended header of 8,388," in refused["message"]
    assert f"past {MAX_TAR_HEADER_BYTES:,} bytes" in refused["message"]
    assert [s["file"] for s in report.stored] == ["modeleval-good.jsonl"]
    assert not report.ignored
    assert _summary_chars() < 5_000


@pytest.mark.django_db
def test_it_refuses_a_gnu_long_name_over_the_bound_from_the_committed_fixture():
    data = (HOSTILE / "artifact-gnu-long-name.tar.gz").read_bytes()
    report = ingest_bytes(("artifact-gnu-long-name.tar.gz", data))
    (refused,) = report.refused
    assert "a GNU long name header of 1,048,576 bytes at byte 0" in refused["message"]
    assert not report.stored and not report.ignored and not Run.objects.exists()


@pytest.mark.django_db
def test_it_refuses_pax_global_headers_that_add_up_past_the_bound():
    comment = {"comment": "c" * (MAX_TAR_HEADER_BYTES + 1)}
    data = _tar((tarfile.TarInfo("modeleval-a.jsonl"), GOOD), format=tarfile.PAX_FORMAT,
                pax_headers=comment)  # fmt: skip
    report = ingest_bytes(("artifact.tar.gz", data))
    (refused,) = report.refused
    assert "a pax global header" in refused["message"] and not report.stored


@pytest.mark.django_db
def test_it_refuses_a_gnu_sparse_entry_whose_extension_blocks_it_would_read_without_end():
    info = tarfile.TarInfo("modeleval-a.jsonl")
    info.type = tarfile.GNUTYPE_SPARSE
    data = _tar((info, GOOD), format=tarfile.GNU_FORMAT)
    report = ingest_bytes(("artifact.tar.gz", data))
    (refused,) = report.refused
    assert "GNU sparse file" in refused["message"] and not report.stored


@pytest.mark.django_db
def test_metadata_within_the_bound_is_read_as_before():
    name = "d" * 2_000 + "/modeleval-a.jsonl"
    for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        Run.objects.all().delete()
        ShardFile.objects.all().delete()
        report = ingest_bytes(("a.tar.gz", _tar((tarfile.TarInfo(name), GOOD), format=fmt)))
        assert not report.refused and len(report.stored) == 1


# --- Every entry counts against the member limit ---------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_directory_entries_count_against_the_member_limit_in_tar_and_zip_alike(settings, kind):
    settings.EVALDASH_MAX_ARCHIVE_MEMBERS = 20
    dirs = [f"d{i}/" for i in range(25)]
    if kind == "tar":
        data = _tar(*[_dir(d) for d in dirs], (tarfile.TarInfo("modeleval-a.jsonl"), GOOD))
        name = "artifact.tar.gz"
    else:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            for d in dirs:
                z.writestr(d, b"")
            z.writestr("modeleval-a.jsonl", GOOD)
        data, name = out.getvalue(), "artifact.zip"
    report = ingest_bytes((name, data))
    (refused,) = report.refused
    assert "at most 20 are read (EVALDASH_MAX_ARCHIVE_MEMBERS)" in refused["message"]
    assert not report.stored and not Run.objects.exists()


# --- Names are stored cut short ---------------------------------------------------------------


def _assert_cut(name: str) -> None:
    assert len(name) == NAME_CHARS and "\u2026" in name, name[:80]


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_long_entry_names_are_stored_cut_with_an_ellipsis_in_summary_refusals_and_shards(kind):
    deep = "d" * 40_000
    names = [f"{deep}/modeleval-a.jsonl", f"{deep}/notes.txt", f"/{deep}/modeleval-b.jsonl"]
    if kind == "tar":
        data = _tar(*[(tarfile.TarInfo(n), GOOD) for n in names], format=tarfile.PAX_FORMAT)
        archive = "artifact.tar.gz"
    else:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            for n in names:
                z.writestr(n, GOOD)
        data, archive = out.getvalue(), "artifact.zip"
    report = ingest_bytes((archive, data))
    (stored,), (ignored,), (refused,) = report.stored, report.ignored, report.refused
    for name in (stored["file"], ignored["file"], refused["file"]):
        _assert_cut(name)
        assert name.startswith(f"{archive}!")
    assert stored["file"].endswith("/modeleval-a.jsonl")
    assert ignored["file"].endswith("/notes.txt")
    assert "path is absolute" in refused["message"]
    _assert_cut(ShardFile.objects.get().name)
    assert _summary_chars() < 5_000


def test_a_short_name_is_kept_whole_and_a_long_one_keeps_its_start_and_end():
    from records.ingest.inputs import shown_name

    assert shown_name("modeleval-a.jsonl") == "modeleval-a.jsonl"
    cut = shown_name("a" * 1_000 + "modeleval-z.jsonl")
    assert cut.startswith("aaa") and cut.endswith("aaamodeleval-z.jsonl") and len(cut) == 300
