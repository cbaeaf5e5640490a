"""The message search vector (PostgreSQL): ASCII text skips the folding steps, and every
text gets the vector the original expression gives."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

TEXTS = [
    "plain ascii, with punctuation: (yes) 42!",
    "Crème brûlée à Paris",
    "Ёлка и ель",
    "東京タワー에서 만나요",
    "mixed café 漢字 ÀÉ and ASCII",
    "",
]


def test_the_stored_vector_equals_the_original_expression_for_any_text() -> None:
    original = importlib.import_module("chats.migrations.0002_message_search").PG_DOCUMENT
    current = importlib.import_module("chats.migrations.0005_message_search_ascii").PG_DOCUMENT
    with connection.cursor() as cursor:
        for text in TEXTS:
            cursor.execute(
                f"SELECT ({original})::text, ({current})::text "  # noqa: S608
                "FROM (SELECT %s::text AS content) s",
                [text],
            )
            before, after = cursor.fetchone()
            assert after == before, text
        cursor.execute(
            "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d JOIN pg_attribute a "
            "ON a.attrelid = d.adrelid AND a.attnum = d.adnum "
            "WHERE d.adrelid = 'chats_message'::regclass AND a.attname = 'search_vector'"
        )
        assert "[^[:ascii:]]" in cursor.fetchone()[0]  # the migrated column is the new one
