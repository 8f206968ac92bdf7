from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from records.devtools.schema import schema_markdown


class Command(BaseCommand):
    help = "Write docs/schema.md from the models (with --check, only say whether it is current)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--check", action="store_true", help="change nothing; exit 1 if the page is stale"
        )

    def handle(self, *args, check: bool = False, **options) -> None:
        path = settings.BASE_DIR / "docs" / "schema.md"
        text = schema_markdown()
        current = path.read_text() if path.exists() else ""
        if check:
            if current != text:
                raise CommandError(f"{path.name} is stale: run manage.py schema_doc")
            self.stdout.write(f"{path.name} is current")
            return
        path.write_text(text)
        tables = text.count("\n## ")
        self.stdout.write(f"{path.name}: {tables} tables written")
