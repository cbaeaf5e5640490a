from django.contrib import admin
from django.urls import include, path

from chatplatform import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", include("chats.api.urls")),
    path("", include("chats.ui.urls")),
]
