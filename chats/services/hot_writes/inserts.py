"""Inserting a model instance with the values the ORM would write, without the ORM's query
building (which costs more CPU than the insert on the rows every turn writes)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Model

from chatplatform.django_internals import instance_mark_saved


@functools.cache
def insert_statement(model: type[Model]) -> tuple[str, tuple[Any, ...]]:
    """The INSERT of a new ``model`` row (all concrete fields but the auto primary key,
    which it returns), and those fields in column order."""
    quote = connection.ops.quote_name
    fields = tuple(f for f in model._meta.concrete_fields if not f.primary_key)
    columns = ", ".join(quote(f.column) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    table = quote(model._meta.db_table)
    pk = quote(model._meta.pk.column)  # type: ignore[union-attr]
    return f"INSERT INTO {table} ({columns}) VALUES ({placeholders}) RETURNING {pk}", fields  # noqa: S608


def insert_instance(instance: Model) -> None:
    """Insert an unsaved ``instance`` (auto primary key) with the values the ORM would write
    (each field's ``pre_save`` and ``get_db_prep_save``), skipping the ORM's query building;
    sets its primary key. Raises IntegrityError as ``save()`` would. No signals are sent."""
    sql, fields = insert_statement(type(instance))
    with connection.cursor() as cursor:
        cursor.execute(sql, db_values(instance, fields))
        instance.pk = cursor.fetchone()[0]
    instance_mark_saved(instance, connection.alias)


def db_values(instance: Model, fields: Sequence[Any]) -> list[Any]:
    """The values the ORM would write for ``fields`` of a new ``instance``."""
    return [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]
