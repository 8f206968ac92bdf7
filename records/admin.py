from __future__ import annotations

from django.contrib import admin, messages
from django.utils import timezone

from records.models import Annotation, AnnotationChange, ApiToken, Label, Run, ShardFile, Upload


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


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    """The triage vocabulary: a team adds its own words here."""

    list_display = ("slug", "title", "order", "description")
    list_editable = ("order",)
    prepopulated_fields = {"slug": ("title",)}


class AnnotationChangeInline(admin.TabularInline):
    model = AnnotationChange
    extra = 0
    can_delete = False
    readonly_fields = ("action", "by", "at", "before", "after")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Annotation)
class AnnotationAdmin(admin.ModelAdmin):
    """Annotations are written on the pages and by the API (each change kept); here they are
    read."""

    list_display = ("created_at", "target", "digest", "case", "attempt", "mode", "label", "author")
    list_filter = ("target", "label", "resolved")
    search_fields = ("case", "mode", "note", "author")
    readonly_fields = [f.name for f in Annotation._meta.fields]
    inlines = [AnnotationChangeInline]

    def has_add_permission(self, request) -> bool:
        return False
