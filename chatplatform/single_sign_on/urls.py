from django.urls import path

from .views import sso_by_email_view, sso_callback_view, sso_start_view

urlpatterns = [
    path("", sso_by_email_view, name="sso_by_email"),
    path("<slug:slug>/", sso_start_view, name="sso_start"),
    path("<slug:slug>/callback/", sso_callback_view, name="sso_callback"),
]
