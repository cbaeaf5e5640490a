"""Routes of the web UI (included at the site root)."""

from __future__ import annotations

from django.urls import path

from chats.ui import views

app_name = "chats_ui"

urlpatterns = [
    path("tenant/switch/", views.tenant_switch, name="tenant_switch"),
    path("account/", views.account, name="account"),
    path("account/import/", views.account_import, name="account_import"),
    path("account/export/", views.account_export, name="account_export"),
    path("account/delete/", views.account_delete_view, name="account_delete"),
    path("account/downloads/<str:token>/", views.transfer_download, name="transfer_download"),
    path("chats/", views.conversation_list, name="conversation_list"),
    path("chats/new/", views.conversation_new, name="conversation_new"),
    path("chats/start/", views.conversation_start_view, name="conversation_start"),
    path("chats/<int:conversation_id>/", views.conversation_detail, name="conversation_detail"),
    path(
        "chats/<int:conversation_id>/rename/",
        views.conversation_rename_view,
        name="conversation_rename",
    ),
    path(
        "chats/<int:conversation_id>/archive/",
        views.conversation_archive_view,
        name="conversation_archive",
    ),
    path(
        "chats/<int:conversation_id>/unarchive/",
        views.conversation_unarchive_view,
        name="conversation_unarchive",
    ),
    path(
        "chats/<int:conversation_id>/delete/",
        views.conversation_delete_view,
        name="conversation_delete",
    ),
    path(
        "chats/<int:conversation_id>/leave/",
        views.conversation_leave_view,
        name="conversation_leave",
    ),
    path(
        "chats/<int:conversation_id>/members/",
        views.participant_add_view,
        name="participant_add",
    ),
    path("chats/<int:conversation_id>/meter/", views.turn_meter, name="turn_meter"),
    path(
        "chats/<int:conversation_id>/summaries/",
        views.conversation_summaries,
        name="conversation_summaries",
    ),
    path(
        "chats/<int:conversation_id>/messages/<int:message_id>/image/",
        views.message_image,
        name="message_image",
    ),
    path(
        "chats/<int:conversation_id>/message-fit/",
        views.message_fit_view,
        name="message_fit",
    ),
    path(
        "chats/<int:conversation_id>/messages/<int:message_id>/versions/",
        views.message_versions_view,
        name="message_versions",
    ),
    path("memories/", views.memory_list, name="memory_list"),
    path("memories/add/", views.memory_add, name="memory_add"),
    path("memories/<int:fact_id>/edit/", views.memory_edit, name="memory_edit"),
    path("memories/<int:fact_id>/delete/", views.memory_delete, name="memory_delete"),
    path("memories/<int:fact_id>/share/", views.memory_share, name="memory_share"),
    path("memories/<int:fact_id>/history/", views.memory_history, name="memory_history"),
]
