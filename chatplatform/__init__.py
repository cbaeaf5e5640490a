"""chatplatform: the platform core (the design card's ``platform/``).

Named ``chatplatform`` because a top-level package called ``platform`` shadows the
standard-library module that ``uuid`` imports, and Django then fails at start-up.
"""

from .celery import app as celery_app

__all__ = ("celery_app",)
