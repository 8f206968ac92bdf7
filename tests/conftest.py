"""Fixtures the test modules share: a logged-in reader, a logged-in uploader, and the demo's
three runs with their key."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from records.devtools.synth import DEMO_KEY, demo_runs
from records.ingest import ingest, inputs_from_paths
from records.models import Run, Upload


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
    ingest(
        inputs_from_paths([DEMO_KEY, *demo_runs(tmp_path)]), Upload.objects.create(source="demo")
    )
    return {r.run_id: r for r in Run.objects.all()}
