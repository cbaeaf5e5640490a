"""The REST API for integrations (``/api/v1/``): thin DRF views over the services and
selectors the UI uses. Authentication by tenant API key or browser session; every request runs
inside its tenant's scope; every error is ``{"error": {"code", "message", "fields"}}``."""
