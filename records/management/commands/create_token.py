from __future__ import annotations

from django.core.management.base import BaseCommand

from records.models import ApiToken


class Command(BaseCommand):
    help = "Create an upload-only API token and print it once (only its hash is kept)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", help="who or what will use it, e.g. 'gitlab-ci'")

    def handle(self, *args, name: str, **options) -> None:
        token, raw = ApiToken.issue(name)
        self.stdout.write(f"token {token.pk} '{name}' (shown once, store it now): {raw}")
