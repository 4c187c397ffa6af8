"""Signals of evals for the layers above it (diagnostics)."""

from __future__ import annotations

from django.dispatch import Signal

# Sent when an eval's ranking was stored (a new fit of its votes), inside the storing
# transaction, with `eval_id`. Receivers defer their work to after commit.
ranking_stored = Signal()
