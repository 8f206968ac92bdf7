from __future__ import annotations

from django.apps import AppConfig


class RecordsConfig(AppConfig):
    name = "records"
    verbose_name = "Evaluation records"

    def ready(self) -> None:
        from records.bulk import among, malloc

        malloc.one_arena()  # before this process starts a thread of its own

        among.register()  # the `__among` lookup
        from records.search import index  # noqa: F401 (connects the receiver forgetting runs)
        from records.views import login  # noqa: F401 (connects the failed-login receiver)
