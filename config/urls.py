from django.contrib import admin
from django.urls import include, path

from chatplatform.invitations.views import invitation_accept_view
from chatplatform.password_reset import LimitedPasswordResetView
from chats.api.compat.urls import anthropic_patterns, openai_patterns
from chats.ui.views import home

urlpatterns = [
    path("", home.home, name="home"),
    path("healthz", home.healthz, name="healthz"),
    path("favicon.ico", home.favicon, name="favicon"),
    path("accounts/password_reset/", LimitedPasswordResetView.as_view(), name="password_reset"),
    path("accounts/sso/", include("chatplatform.single_sign_on.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("invitations/<str:token>/", invitation_accept_view, name="invitation_accept"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("chats.api.urls")),
    path("compat/openai/v1/", include(openai_patterns)),
    path("compat/anthropic/v1/", include(anthropic_patterns)),
    path("", include("chats.ui.urls")),
]
