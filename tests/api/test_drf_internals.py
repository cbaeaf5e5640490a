"""The adapter over Django REST framework's private API (:mod:`chats.api.drf_internals`)
still matches the installed REST framework: a request wraps the very Django request it was
built from."""

from __future__ import annotations

from django.test import RequestFactory
from rest_framework.request import Request

from chats.api.drf_internals import django_request


def test_the_wrapped_request_is_the_django_request():
    wrapped = RequestFactory().get("/api/v1/")
    wrapped.META["probe"] = "marker"  # read back through the adapter
    request = Request(wrapped)
    assert django_request(request) is wrapped
    assert django_request(request).META["probe"] == "marker"
