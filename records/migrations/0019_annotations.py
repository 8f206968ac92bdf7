"""Labels and notes beside the evidence: the triage vocabulary (seeded with its six words; the
admin adds more), annotations on a case, an attempt or a failure mode, and a row per change."""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

LABELS = [
    (
        "known-flaky",
        "known flaky",
        "Fails now and then for a known reason; does not fail the gate.",
    ),
    ("corpus-bug", "corpus bug", "The case or its key is wrong, not the model."),
    ("model-error", "model error", "The model got it wrong: a real failure."),
    ("harness-error", "harness error", "The tool server or the harness failed, not the model."),
    ("expected", "expected", "The change was meant (a new model, a changed case)."),
    ("needs-review", "needs review", "Someone should look at it."),
]


def seed_labels(apps, schema_editor):
    label = apps.get_model("records", "Label")
    for order, (slug, title, description) in enumerate(LABELS, start=1):
        label.objects.get_or_create(
            slug=slug, defaults={"title": title, "description": description, "order": order}
        )


def unseed_labels(apps, schema_editor):
    apps.get_model("records", "Label").objects.filter(slug__in=[s for s, _, _ in LABELS]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("records", "0018_call_index_bigint"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Label",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("slug", models.SlugField(max_length=40, unique=True)),
                ("title", models.CharField(max_length=80)),
                ("description", models.TextField(blank=True)),
                ("order", models.PositiveSmallIntegerField(default=100)),
            ],
            options={
                "ordering": ["order", "slug"],
            },
        ),
        migrations.CreateModel(
            name="Annotation",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "target",
                    models.CharField(
                        choices=[
                            ("case", "case"),
                            ("attempt", "attempt"),
                            ("mode", "failure mode"),
                        ],
                        max_length=8,
                    ),
                ),
                ("digest", models.CharField(blank=True, max_length=64)),
                ("case", models.CharField(blank=True, max_length=500)),
                (
                    "mode",
                    models.CharField(
                        blank=True,
                        max_length=16,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[0-9a-f]{16}\\Z",
                                "a failure mode id is 16 lowercase hex characters",
                            )
                        ],
                    ),
                ),
                ("note", models.TextField(blank=True)),
                (
                    "link",
                    models.URLField(
                        blank=True,
                        max_length=2000,
                        validators=[
                            django.core.validators.URLValidator(
                                message="a link is an http or https address",
                                schemes=["http", "https"],
                            )
                        ],
                    ),
                ),
                ("author", models.CharField(max_length=200)),
                ("client_key", models.CharField(blank=True, max_length=200)),
                (
                    "created_at",
                    models.DateTimeField(db_index=True, default=django.utils.timezone.now),
                ),
                ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("resolved", models.BooleanField(default=False)),
                ("resolved_at", models.DateTimeField(blank=True, null=True)),
                ("resolved_by", models.CharField(blank=True, max_length=200)),
                (
                    "attempt",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="annotations",
                        to="records.attempt",
                    ),
                ),
                (
                    "token",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to="records.apitoken",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "label",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="annotations",
                        to="records.label",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="AnnotationChange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("action", models.CharField(max_length=16)),
                ("by", models.CharField(max_length=200)),
                ("at", models.DateTimeField(default=django.utils.timezone.now)),
                ("before", models.JSONField(blank=True, null=True)),
                ("after", models.JSONField(default=dict)),
                (
                    "annotation",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="changes",
                        to="records.annotation",
                    ),
                ),
            ],
            options={
                "ordering": ["at", "id"],
            },
        ),
        migrations.AddIndex(
            model_name="annotation",
            index=models.Index(fields=["target", "digest", "case"], name="annotation_case"),
        ),
        migrations.AddIndex(
            model_name="annotation",
            index=models.Index(fields=["target", "mode"], name="annotation_mode"),
        ),
        migrations.AddIndex(
            model_name="annotation",
            index=models.Index(fields=["label", "resolved"], name="annotation_label"),
        ),
        migrations.AddConstraint(
            model_name="annotation",
            constraint=models.UniqueConstraint(
                condition=models.Q(("client_key", ""), _negated=True),
                fields=("client_key",),
                name="annotation_client_key_unique",
            ),
        ),
        migrations.AddConstraint(
            model_name="annotation",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("target", "case"),
                        models.Q(("digest", ""), _negated=True),
                        models.Q(("case", ""), _negated=True),
                    ),
                    models.Q(("target", "attempt"), ("attempt__isnull", False)),
                    models.Q(("target", "mode"), models.Q(("mode", ""), _negated=True)),
                    _connector="OR",
                ),
                name="annotation_names_its_target",
            ),
        ),
        migrations.RunPython(seed_labels, unseed_labels),
    ]
