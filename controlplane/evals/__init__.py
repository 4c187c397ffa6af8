"""Evals: eval sets, evals over checkpoints, blind battles and votes, and the ranking."""
