"""The tenant-scoped Django admin. Registrations live in ``registrations.py``."""

from . import policies as _policies  # noqa: F401  (registers the model admins)
from . import registrations as _registrations  # noqa: F401
