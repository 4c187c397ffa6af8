"""Signals of metrics for the layers above it (diagnostics): sent after a stored batch commits."""

from __future__ import annotations

from django.dispatch import Signal

# Sent after a metrics batch that stored or changed points commits, with `run_id` and the batch's
# columns: `names` (list[str]), `key_index`, `steps`, `values` (numpy arrays of intp, int64 and
# float64: point i is names[key_index[i]] at steps[i] = values[i]), which no one may change.
# Receivers run on ingest's path: keep them cheap.
points_stored = Signal()
