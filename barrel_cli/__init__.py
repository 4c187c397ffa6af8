"""``barrel``: the command line client of the Barrel control plane (REST API and websocket only)."""
