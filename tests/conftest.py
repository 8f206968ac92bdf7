"""Fixtures the test modules share: a logged-in reader and a logged-in uploader."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission


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
