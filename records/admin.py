from __future__ import annotations

from django.contrib import admin, messages
from django.utils import timezone

from records.models import ApiToken, Run, ShardFile, Upload


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "hint", "created_at", "created_by", "last_used_at", "revoked_at")
    readonly_fields = ("hint", "created_at", "created_by", "last_used_at")
    fields = ("name", "hint", "created_at", "created_by", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def save_model(self, request, obj, form, change) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, raw = ApiToken.issue(obj.name, created_by=request.user)
        obj.pk = token.pk
        obj.digest, obj.hint, obj.created_at = token.digest, token.hint, token.created_at
        messages.warning(request, f"Token for '{obj.name}' (shown once, copy it now): {raw}")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        n = queryset.filter(revoked_at=None).update(revoked_at=timezone.now())
        messages.info(request, f"{n} token(s) revoked")


@admin.register(Upload)
class UploadAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "source", "user", "token")
    readonly_fields = ("created_at", "source", "user", "token", "summary")


@admin.register(ShardFile)
class ShardFileAdmin(admin.ModelAdmin):
    list_display = ("name", "sha256", "size", "lines", "warning_count", "created_at")
    readonly_fields = [f.name for f in ShardFile._meta.fields]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("run_id", "commit", "started_at", "tier", "attempt_count")
    search_fields = ("run_id", "commit")
    readonly_fields = [f.name for f in Run._meta.fields]
