"""The chat recipe: one checkpoint loaded in a Ray actor, answering chat messages token by token."""
