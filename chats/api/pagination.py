"""Cursor pagination: stable under inserts, no counts, constant cost per page."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request


class StrictCursor(CursorPagination):
    """A cursor pagination that refuses a malformed ``page_size`` (400) instead of silently
    using the default; sizes above the maximum are capped."""

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param or "page_size")
        if raw is None:
            return int(self.page_size or 1)
        if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
            raise ValidationError({"page_size": ["A positive integer is required."]})
        size = int(raw)
        return min(size, self.max_page_size) if self.max_page_size else size


class ConversationCursor(StrictCursor):
    """Most recently updated first."""

    ordering = ("-updated_at", "-id")
    page_size = 20
    page_size_query_param = "page_size"
    max_page_size = 100


class MessageCursor(StrictCursor):
    """Oldest first, by sequence number; ``next`` walks forward in the conversation."""

    ordering = ("seq",)
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
