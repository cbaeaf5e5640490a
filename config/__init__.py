"""Configuration: settings, URLs, the ASGI and WSGI entry points, WebSocket routing and the
Celery app. The top layer: it may import every app and the platform; nothing imports it
(the Celery app is loaded here, with the settings, so tasks bind to it)."""

from .celery import app as celery_app

__all__ = ("celery_app",)
