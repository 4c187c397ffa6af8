"""Bounds shared by every layer (a leaf: imports nothing of Barrel)."""

# The largest PostgreSQL bigint: primary keys and metric steps. A larger number in a path or a
# body names nothing (controlplane.urls.IdConverter) and is refused before it reaches SQL.
MAX_BIGINT = 2**63 - 1
