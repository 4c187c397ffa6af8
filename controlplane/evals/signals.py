"""Signals of evals: for the layers above it (diagnostics), and for its tasks (tasks.py), which
import its services and so cannot be called by them."""

from __future__ import annotations

from django.dispatch import Signal

# Sent when an eval's ranking was stored (a new fit of its votes), inside the storing
# transaction, with `eval_id`. Receivers defer their work to after commit.
ranking_stored = Signal()

# Sent when an eval opened for votes (its generation run succeeded), with `eval_id`, inside the
# opening transaction if there is one. Receivers defer their work to after commit.
eval_opened = Signal()
