"""Cursor pagination: stable under inserts, no counts, constant cost per page."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

#: Digits beyond which a page size is simply "more than the maximum" (int() refuses very long
#: numbers, and no page is that large).
MAX_SIZE_DIGITS = 9


class StrictCursor(CursorPagination):
    """A cursor pagination that refuses a malformed ``page_size`` (400) instead of silently
    using the default; sizes above the maximum are capped. A cursor whose position is not a
    value of the ordering field (an edited cursor) is refused like any invalid cursor (404),
    before it reaches the database."""

    position_field: models.Field | None = None

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param or "page_size")
        if raw is None:
            return int(self.page_size or 1)
        digits = raw.lstrip("0")
        if not (raw.isascii() and raw.isdigit()) or not digits:
            raise ValidationError({"page_size": ["A positive integer is required."]})
        size = int(digits) if len(digits) <= MAX_SIZE_DIGITS else 10**MAX_SIZE_DIGITS
        return min(size, self.max_page_size) if self.max_page_size else size

    def paginate_queryset(
        self, queryset: models.QuerySet, request: Request, view: Any = None
    ) -> list[Any] | None:
        ordering = self.get_ordering(request, queryset, view)
        self.position_field = queryset.model._meta.get_field(ordering[0].lstrip("-"))
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request: Request) -> Cursor | None:
        cursor = super().decode_cursor(request)
        if cursor is not None and cursor.position is not None:
            field, position = self.position_field, str(cursor.position)
            try:
                if field is None or "\x00" in position:
                    raise DjangoValidationError("not a position")
                # to_python, then the field's validators (an integer field's own range).
                field.clean(position, None)
            except DjangoValidationError:
                raise NotFound(self.invalid_cursor_message) from None
        return cursor


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
