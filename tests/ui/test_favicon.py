"""The site's icon: pages link an SVG in the static files, and /favicon.ico, which browsers
ask for on their own (also before anyone logs in), leads to it."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.templatetags.static import static

pytestmark = pytest.mark.django_db


def test_favicon_ico_leads_to_the_linked_svg(client):
    icon = static("favicon.svg")
    assert finders.find("favicon.svg")
    asked = client.get("/favicon.ico")
    assert asked.status_code == 302 and asked["Location"] == icon
    assert client.head("/favicon.ico").status_code == 302
    assert client.post("/favicon.ico").status_code == 405
    login = client.get("/accounts/login/").content.decode()
    assert f'<link rel="icon" href="{icon}" type="image/svg+xml">' in login
    admin_login = client.get("/admin/login/").content.decode()
    assert f'<link rel="icon" href="{icon}" type="image/svg+xml">' in admin_login
