"""The tenant-scoped Django admin. Registrations live in ``registrations.py``, ``policies.py``,
``invitations.py``, ``identity_providers.py`` and ``audit.py``."""

from django.contrib import admin as _admin

from . import audit as _audit  # noqa: F401  (registers the model admins)
from . import identity_providers as _identity_providers  # noqa: F401
from . import invitations as _invitations  # noqa: F401
from . import policies as _policies  # noqa: F401
from . import registrations as _registrations  # noqa: F401
from .global_models import hide_global_objects

# auth and django_celery_beat come before this app in INSTALLED_APPS: their admins exist now.
hide_global_objects(_admin.site)
