"""The diagnosis state as msgpack (one bytea, cheap to encode and write on every update) instead
of JSON; the report is derived on read, no longer stored."""

from __future__ import annotations

from typing import Any

import msgpack  # type: ignore[import-untyped]
from django.db import migrations, models


def pack_states(apps: Any, schema_editor: Any) -> None:
    RunDiagnosis = apps.get_model("diagnostics", "RunDiagnosis")
    for row in RunDiagnosis.objects.only("pk", "state").iterator(chunk_size=200):
        RunDiagnosis.objects.filter(pk=row.pk).update(packed=msgpack.packb(row.state or {}))


def unpack_states(apps: Any, schema_editor: Any) -> None:
    RunDiagnosis = apps.get_model("diagnostics", "RunDiagnosis")
    for row in RunDiagnosis.objects.only("pk", "packed").iterator(chunk_size=200):
        state = msgpack.unpackb(bytes(row.packed), strict_map_key=False) if row.packed else {}
        RunDiagnosis.objects.filter(pk=row.pk).update(state=state)


class Migration(migrations.Migration):
    dependencies = [("diagnostics", "0001_diagnostics")]

    operations = [
        migrations.AddField(model_name="rundiagnosis", name="packed", field=models.BinaryField(default=b"")),
        migrations.RunPython(pack_states, unpack_states),
        migrations.RemoveField(model_name="rundiagnosis", name="state"),
        migrations.RemoveField(model_name="rundiagnosis", name="report"),
    ]
