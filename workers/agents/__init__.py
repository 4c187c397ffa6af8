"""Multi-turn agent episodes: the model calls tools in a declared format, the sandbox runs them.

:mod:`workers.agents.tools` holds the call format and the tools; :mod:`workers.agents.episodes`
the loop a rollout worker runs (generate, pause at a call, run it, splice its output in, go on).
"""
