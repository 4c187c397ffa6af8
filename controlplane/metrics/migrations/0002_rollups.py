"""Series summaries and multi-resolution rollups (level k: buckets of 8**k steps), backfilled
from the points already stored so existing runs read through the rollups at once."""

import django.db.models.deletion
from django.db import migrations, models

import controlplane.metrics.models

# The same level rule as controlplane.metrics.rollups.levels_for: the largest k <= 20 with
# 8**k <= last_step - first_step + 1. Sums use each value's shortest round-trip text, which
# extra_float_digits > 0 selects.
BACKFILL = """
SET LOCAL extra_float_digits = 1;
UPDATE metrics_metricseries s
SET count = a.n, first_step = a.lo, last_step = a.hi, last_value = a.last_value,
    levels = (SELECT count(*) FROM generate_series(1, 20) k WHERE (1::bigint << (3 * k)) <= a.hi - a.lo + 1)
FROM (
    SELECT series_id, count(*) AS n, min(step) AS lo, max(step) AS hi,
           (array_agg(value ORDER BY step DESC))[1] AS last_value
    FROM metrics_metricpoint GROUP BY series_id
) a
WHERE s.id = a.series_id;
INSERT INTO metrics_metricrollup (series_id, level, bucket, count, min, max, sum, last_step, last_value)
SELECT p.series_id, 1, p.step >> 3, count(*), min(p.value), max(p.value), sum(p.value::text::numeric),
       max(p.step), (array_agg(p.value ORDER BY p.step DESC))[1]
FROM metrics_metricpoint p JOIN metrics_metricseries s ON s.id = p.series_id AND s.levels >= 1
GROUP BY p.series_id, p.step >> 3;
DO $$
BEGIN
    FOR k IN 2..20 LOOP
        INSERT INTO metrics_metricrollup (series_id, level, bucket, count, min, max, sum, last_step, last_value)
        SELECT r.series_id, k, r.bucket >> 3, sum(r.count), min(r.min), max(r.max), sum(r.sum),
               max(r.last_step), (array_agg(r.last_value ORDER BY r.last_step DESC))[1]
        FROM metrics_metricrollup r JOIN metrics_metricseries s ON s.id = r.series_id AND s.levels >= k
        WHERE r.level = k - 1
        GROUP BY r.series_id, r.bucket >> 3;
    END LOOP;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("metrics", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="metricseries",
            name="count",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="metricseries",
            name="first_step",
            field=models.BigIntegerField(null=True),
        ),
        migrations.AddField(
            model_name="metricseries",
            name="last_step",
            field=models.BigIntegerField(null=True),
        ),
        migrations.AddField(
            model_name="metricseries",
            name="last_value",
            field=models.FloatField(null=True),
        ),
        migrations.AddField(
            model_name="metricseries",
            name="levels",
            field=models.SmallIntegerField(db_default=0, default=0),
        ),
        migrations.CreateModel(
            name="MetricRollup",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "series_id", "level", "bucket", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("level", models.SmallIntegerField()),
                ("bucket", models.BigIntegerField()),
                ("count", models.BigIntegerField()),
                ("min", models.FloatField()),
                ("max", models.FloatField()),
                ("sum", controlplane.metrics.models.ExactSumField(decimal_places=0, max_digits=1000)),
                ("last_step", models.BigIntegerField()),
                ("last_value", models.FloatField()),
                (
                    "series",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="rollups",
                        to="metrics.metricseries",
                    ),
                ),
            ],
        ),
        # A deferred FK check per point at commit cost more than the insert (see models.py).
        migrations.AlterField(
            model_name="metricpoint",
            name="series",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="points",
                to="metrics.metricseries",
            ),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
