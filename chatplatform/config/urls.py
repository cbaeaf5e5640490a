from django.contrib import admin
from django.urls import include, path

from chats.ui.views import home

urlpatterns = [
    path("", home.home, name="home"),
    path("healthz", home.healthz, name="healthz"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", include("chats.api.urls")),
    path("", include("chats.ui.urls")),
]
