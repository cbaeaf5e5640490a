"""Routes of the SDK-compatible API, one list per protocol (``config/urls.py`` mounts them at
the protocol's prefix). Anything else under a prefix is 404 in the protocol's shape."""

from __future__ import annotations

from django.urls import path, re_path

from chats.api.compat.anthropic_views import CountTokensView, MessagesView
from chats.api.compat.base import compat_not_found
from chats.api.compat.openai_views import (
    ChatCompletionsView,
    ModelListView,
    ResponsesView,
    ResponseView,
)

openai_patterns = [
    path("chat/completions", ChatCompletionsView.as_view(), name="compat-openai-chat"),
    path("models", ModelListView.as_view(), name="compat-openai-models"),
    path("responses", ResponsesView.as_view(), name="compat-openai-responses"),
    path("responses/<str:response_id>", ResponseView.as_view(), name="compat-openai-response"),
    re_path(r"^.*$", compat_not_found),
]

anthropic_patterns = [
    path("messages", MessagesView.as_view(), name="compat-anthropic-messages"),
    path("messages/count_tokens", CountTokensView.as_view(), name="compat-anthropic-count-tokens"),
    re_path(r"^.*$", compat_not_found),
]
