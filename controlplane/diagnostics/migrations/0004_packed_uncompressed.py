"""A diagnosis's `packed` state is stored out of line uncompressed (STORAGE EXTERNAL): it is
rewritten on every update, and msgpack of floats compresses by a quarter at most, while
compressing it cost PostgreSQL a third of the UPDATE's time (benchmarks/diagnostics.py)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("diagnostics", "0003_feed_position")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE diagnostics_rundiagnosis ALTER COLUMN packed SET STORAGE EXTERNAL",
            reverse_sql="ALTER TABLE diagnostics_rundiagnosis ALTER COLUMN packed SET STORAGE EXTENDED",
        )
    ]
