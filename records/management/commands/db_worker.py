from __future__ import annotations

from django_tasks_db.management.commands.db_worker import Command as TasksWorker

from records.tasks.workers import Heart, beat


class Command(TasksWorker):
    help = "Run a task worker (django-tasks-db's) that beats and re-queues orphaned tasks."

    def handle(self, *args, **options) -> None:
        beat(options["worker_id"])  # before the first claim, so it is never taken as stale
        heart = Heart(options["worker_id"])
        heart.start()
        try:
            super().handle(*args, **options)
        finally:
            heart.stop()
