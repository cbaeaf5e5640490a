"""Entry pages. The chat UI itself lives in ``chats``."""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    """Anonymous visitors get the log-in page; members get their tenant's start page."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    return render(request, "home.html", {"tenant": getattr(request, "tenant", None)})


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})
