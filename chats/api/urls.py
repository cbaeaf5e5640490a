"""Routes of ``/api/v1/``. Anything else under the prefix answers the JSON 404."""

from __future__ import annotations

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from chats.api import schema  # noqa: F401  (registers the authentication schemes)
from chats.api.errors import not_found
from chats.api.views.context import ContextPreviewView, TurnRecordView
from chats.api.views.conversations import (
    ConversationArchiveView,
    ConversationDetailView,
    ConversationLeaveView,
    ConversationListView,
)
from chats.api.views.exports import ExportDetailView, ExportDownloadView, ExportListView
from chats.api.views.facts import FactByKeyView, FactDetailView, FactListView
from chats.api.views.messages import MessageDetailView, MessageImageView, MessageListView
from chats.api.views.platform import (
    MeView,
    ModelProfileDetailView,
    ModelProfileListView,
    PolicyView,
)
from chats.api.views.revisions import (
    MessageEditView,
    MessageRegenerateView,
    MessageVersionsView,
)
from chats.api.views.root import ApiRootView
from chats.api.views.summaries import SummaryListView, SummaryRefreshView
from chats.api.views.usage import UsageView

app_name = "api"

CONVERSATION = "conversations/<int:conversation_id>/"

urlpatterns = [
    path("", ApiRootView.as_view(), name="root"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    path("me/", MeView.as_view(), name="me"),
    path("exports/", ExportListView.as_view(), name="exports"),
    path("exports/<int:export_id>/", ExportDetailView.as_view(), name="export"),
    path("exports/<int:export_id>/download/", ExportDownloadView.as_view(), name="export-download"),
    path("conversations/", ConversationListView.as_view(), name="conversations"),
    path(CONVERSATION, ConversationDetailView.as_view(), name="conversation"),
    path(CONVERSATION + "archive/", ConversationArchiveView.as_view(), name="archive"),
    path(CONVERSATION + "leave/", ConversationLeaveView.as_view(), name="leave"),
    path(CONVERSATION + "messages/", MessageListView.as_view(), name="messages"),
    path(
        CONVERSATION + "messages/<int:message_id>/",
        MessageDetailView.as_view(),
        name="message",
    ),
    path(
        CONVERSATION + "messages/<int:message_id>/image/",
        MessageImageView.as_view(),
        name="message-image",
    ),
    path(
        CONVERSATION + "messages/<int:message_id>/regenerate/",
        MessageRegenerateView.as_view(),
        name="message-regenerate",
    ),
    path(
        CONVERSATION + "messages/<int:message_id>/edit/",
        MessageEditView.as_view(),
        name="message-edit",
    ),
    path(
        CONVERSATION + "messages/<int:message_id>/versions/",
        MessageVersionsView.as_view(),
        name="message-versions",
    ),
    path(
        CONVERSATION + "messages/<int:message_id>/context/",
        TurnRecordView.as_view(),
        name="turn-record",
    ),
    path(CONVERSATION + "context/", ContextPreviewView.as_view(), name="context-preview"),
    path(CONVERSATION + "summaries/", SummaryListView.as_view(), name="summaries"),
    path(
        CONVERSATION + "summaries/refresh/",
        SummaryRefreshView.as_view(),
        name="summaries-refresh",
    ),
    path("facts/", FactListView.as_view(), name="facts"),
    path("facts/<int:fact_id>/", FactDetailView.as_view(), name="fact"),
    path("facts/by-key/<str:key>/", FactByKeyView.as_view(), name="fact-by-key"),
    path("usage/", UsageView.as_view(), name="usage"),
    path("policy/", PolicyView.as_view(), name="policy"),
    path("model-profiles/", ModelProfileListView.as_view(), name="model-profiles"),
    path(
        "model-profiles/<int:profile_id>/", ModelProfileDetailView.as_view(), name="model-profile"
    ),
    re_path(r"^.*$", not_found, name="not-found"),
]
