"""Code that runs inside Ray jobs. Never imports Django: it reaches the control plane over HTTP only."""
