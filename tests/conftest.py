"""Fixtures the test modules share: a logged-in reader, a logged-in uploader, the demo's three
runs with their key, and the searched store."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth.models import Permission

from records.devtools.synth import demo_files
from records.ingest import ingest, inputs_from_paths
from records.models import Run, Upload
from tests.searched import store_searched


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """PBKDF2's deliberate cost guards stored passwords; tests that log in and fail dozens of
    times would spend minutes on it."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def viewer(client, django_user_model):
    """A logged-in account with no permission beyond reading."""
    user = django_user_model.objects.create_user("viewer", password="pw-123456789")
    client.force_login(user)
    return user


@pytest.fixture
def uploader(client, django_user_model):
    """A logged-in account that may upload."""
    user = django_user_model.objects.create_user("uploader", password="pw-123456789")
    user.user_permissions.add(Permission.objects.get(codename="add_upload"))
    client.force_login(user)
    return user


@pytest.fixture
def demo(tmp_path, db):
    """The demo's key and three runs (the second regresses one model on meta), by run id."""
    ingest(inputs_from_paths(demo_files(tmp_path)), Upload.objects.create(source="demo"))
    return {r.run_id: r for r in Run.objects.all()}


@pytest.fixture
def store(tmp_path, db):
    """The searched store: the demo's runs, the fixture shard and a hostile copy of it, with the
    shards read as plain JSON to check the search's answers against."""
    return store_searched(tmp_path)


@pytest.fixture(autouse=True)
def commit_hooks_run_as_in_production(monkeypatch):
    """A test's own transaction stands in for autocommit: `transaction.on_commit` callbacks run
    when the code's outermost atomic block exits (as they do on its commit in production), not
    never (the test's transaction is rolled back)."""
    from django.db import transaction
    from django.db.backends.base.base import BaseDatabaseWrapper

    def at_test_level(conn) -> bool:
        return all(getattr(b, "_from_testcase", False) for b in conn.atomic_blocks)

    register, leave = BaseDatabaseWrapper.on_commit, transaction.Atomic.__exit__

    def on_commit(self, func, robust=False):
        if self.in_atomic_block and at_test_level(self):
            return func()
        return register(self, func, robust)

    def exit_(self, exc_type, exc_value, tb):
        result = leave(self, exc_type, exc_value, tb)
        conn = transaction.get_connection(self.using)
        if conn.in_atomic_block and at_test_level(conn) and not conn.needs_rollback:
            hooks, conn.run_on_commit = conn.run_on_commit, []
            for _, func, _ in hooks:
                func()
        return result

    monkeypatch.setattr(BaseDatabaseWrapper, "on_commit", on_commit)
    monkeypatch.setattr(transaction.Atomic, "__exit__", exit_)


@pytest.fixture(autouse=True, scope="session")
def uploads_storage_in_a_temporary_directory(tmp_path_factory):
    """Uploads wait in a directory of the test run's own (also for the servers and workers the
    tests start, through EVALDASH_UPLOAD_DIR), never in the checkout's var/."""
    from django.conf import settings
    from django.test import override_settings

    where = tmp_path_factory.mktemp("uploads")
    os.environ["EVALDASH_UPLOAD_DIR"] = str(where)
    storages = {
        **settings.STORAGES,
        "uploads": {**settings.STORAGES["uploads"], "OPTIONS": {"location": str(where)}},
    }
    with override_settings(STORAGES=storages, EVALDASH_UPLOAD_DIR=where):
        yield where


@pytest.fixture
def upload_dir(settings, tmp_path, monkeypatch):
    """A fresh, empty uploads storage directory for one test, for tests that look into it."""
    where = tmp_path / "uploads-storage"
    where.mkdir()
    monkeypatch.setenv("EVALDASH_UPLOAD_DIR", str(where))
    settings.STORAGES = {
        **settings.STORAGES,
        "uploads": {**settings.STORAGES["uploads"], "OPTIONS": {"location": str(where)}},
    }
    return where


def files_under(path) -> list[str]:
    """Every file below `path`, relative to it (directories that are empty do not count)."""
    return sorted(
        os.path.relpath(os.path.join(d, f), path) for d, _, names in os.walk(path) for f in names
    )
