"""Fields shared by the API's serializers."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class TextField(serializers.CharField):
    """A string, and only a string: numbers and booleans are refused instead of being turned
    into text (DRF's CharField would store ``5`` as ``"5"``)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))
