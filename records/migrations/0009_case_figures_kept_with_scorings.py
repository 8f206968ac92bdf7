"""Per-case figures kept with each scoring: what the case pages read, so they never read a verdict."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('records', '0008_uploads_queued_as_tasks'),
    ]

    operations = [
        migrations.CreateModel(
            name='CaseFigure',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('case', models.TextField()),
                ('row_key', models.TextField()),
                ('model', models.TextField()),
                ('surface', models.TextField()),
                ('clean', models.IntegerField()),
                ('counted', models.IntegerField()),
                ('total', models.IntegerField()),
                ('marks', models.TextField()),
                ('scoring', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='case_figures', to='records.scoring')),
            ],
            options={
                'indexes': [models.Index(fields=['scoring', 'case'], name='records_cas_scoring_41af2d_idx'), models.Index(fields=['case', 'scoring'], name='records_cas_case_1d5c95_idx')],
            },
        ),
    ]
