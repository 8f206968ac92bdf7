"""Static files under content-hashed, compressed names once `collectstatic` has run."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from whitenoise.storage import CompressedManifestStaticFilesStorage


class HashedStatic(CompressedManifestStaticFilesStorage):
    """WhiteNoise's storage, with two changes. A file `collectstatic` has written is named by
    its hash under DEBUG too (Django's own falls back to plain names there), so the demo's
    pages load plotly.js once, compressed, and keep it, as a deployment's do. A file it has not
    written (a fresh checkout, or EVALDASH_PLAIN_STATIC, which the tests set so that a stale
    collection never stands in for the sources) keeps its plain name, served from the finders."""

    manifest_strict = False

    def url(self, name: Any, force: bool = False) -> str:
        if settings.EVALDASH_PLAIN_STATIC or not self.hashed_files.get(
            self.hash_key(self.clean_name(name))
        ):
            return FileSystemStorage.url(self, name)
        return super().url(name, force=True)
