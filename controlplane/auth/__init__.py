"""Authentication and access above the apps: tokens, bearer headers, websockets, rate limits,
and the policy of who may write into a run.

This package may import the models and selectors of `teams` and `runs` (and controlplane.api
for errors); only view modules (`*/api.py`, consumers, asgi, urls, settings) import it, never a
model, service, selector, storage or task module.
"""
