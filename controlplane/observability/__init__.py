"""The control plane's own health, as Prometheus metrics served at /metrics.

counters: figures made in the web process (a leaf; anybody may import it).
collectors: figures read at scrape time from where they are true, and the /metrics view
(imported by controlplane.urls only).
"""
