"""The adapter over Django's private API (:mod:`chatplatform.django_internals`) still matches
the installed Django: each internal it sets or reads does what the adapter relies on."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import connection
from django.db.models import Manager

from chatplatform.django_internals import (
    connection_health_checked,
    instance_mark_saved,
    manager_database,
)
from chatplatform.models import Tenant


@pytest.mark.django_db
def test_a_checked_connection_skips_the_health_check_query():
    connection.ensure_connection()
    enabled = connection.settings_dict["CONN_HEALTH_CHECKS"]
    connection.settings_dict["CONN_HEALTH_CHECKS"] = True
    try:
        connection.close_if_unusable_or_obsolete()  # the next use would check
        with mock.patch.object(connection, "is_usable", return_value=True) as is_usable:
            connection.close_if_health_check_failed()
        assert is_usable.called  # Django checks an unchecked connection

        connection.close_if_unusable_or_obsolete()
        connection_health_checked(connection)
        with mock.patch.object(connection, "is_usable", return_value=True) as is_usable:
            connection.close_if_health_check_failed()
        assert not is_usable.called
    finally:
        connection.settings_dict["CONN_HEALTH_CHECKS"] = enabled


@pytest.mark.django_db
def test_an_instance_marked_saved_is_what_save_leaves():
    saved = Tenant(name="Saved", slug="saved")
    saved.save()
    marked = Tenant(name="Marked", slug="marked")
    assert marked._state.adding and marked._state.db is None

    instance_mark_saved(marked, connection.alias)

    assert (marked._state.adding, marked._state.db) == (saved._state.adding, saved._state.db)
    assert marked._state.adding is False and marked._state.db == connection.alias


def test_a_managers_database_is_the_alias_it_was_bound_to():
    manager = Tenant.objects
    assert isinstance(manager, Manager)
    assert manager_database(manager) is None  # the router's choice
    assert manager_database(manager.db_manager("other")) == "other"
    assert manager.db_manager("other").get_queryset().db == "other"
