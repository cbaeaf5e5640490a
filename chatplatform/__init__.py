"""chatplatform: the platform (the design card's ``platform/``).

Named ``chatplatform`` because a top-level package called ``platform`` shadows the
standard-library module that ``uuid`` imports, and Django then fails at start-up.

Sub-packages by layer, top to bottom (``docs/architecture.md``; checked by ``make lint``):
``config`` (settings, URLs, ASGI, Celery app) above the apps; ``admin`` (the tenant admin's
console, which reads every app) beside it; the platform itself (tenancy, models, services)
below the apps; ``core`` (pure, no Django) at the bottom.
"""
