"""The one adapter over Django REST framework's private API: the Django request a REST
framework request wraps (``Request._request``), which the API's bridge to the reply
pipeline's event loop needs. Nothing else in the project touches it;
``tests/api/test_drf_internals.py`` fails when the installed REST framework changes it.
"""

from __future__ import annotations

from django.http import HttpRequest
from rest_framework.request import Request


def django_request(request: Request) -> HttpRequest:
    """The Django request ``request`` wraps."""
    return request._request
