"""An index on (run, md5(prompt)): the run page's "same prompt across versions" view
(`GET /runs/{id}/samples?prompt_of=`) finds a prompt's samples among a run's hundreds of
thousands without comparing every prompt. On the hash: a prompt may be 64 KiB, past what a
b-tree entry can hold.

Raw SQL, not a Meta index: the model keeps no field for the hash, and this way no autodetected
migration drops it. Built CONCURRENTLY so that a large samples table keeps taking the jobs'
samples while it is built.
"""

from django.db import migrations


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [("checkpoints", "0002_samples")]

    operations = [
        migrations.RunSQL(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS sample_run_prompt_md5 ON checkpoints_sample (run_id, md5(prompt))",
            "DROP INDEX CONCURRENTLY IF EXISTS sample_run_prompt_md5",
        ),
    ]
