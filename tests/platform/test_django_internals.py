"""The adapter over Django's private API (:mod:`chatplatform.django_internals`) still matches
the installed Django: each internal it sets or reads does what the adapter relies on."""

from __future__ import annotations

import io
from unittest import mock

import pytest
from django import forms
from django.contrib import admin
from django.core.management.base import OutputWrapper
from django.db import connection
from django.db.models import Manager

from chatplatform.django_internals import (
    InstanceValidationHook,
    admin_registrations,
    connection_health_checked,
    instance_mark_saved,
    manager_database,
    output_stream,
)
from chatplatform.models import Tenant


@pytest.mark.django_db
def test_a_checked_connection_skips_the_health_check_query():
    if getattr(connection, "pool", None) is not None:
        pytest.skip(
            "with the connection pool, the pool checks each connection it hands out "
            "(CONN_HEALTH_CHECKS) and Django checks none itself"
        )
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


class TenantForm(InstanceValidationHook, forms.ModelForm):
    class Meta:
        model = Tenant
        fields = ["name", "slug"]

    def instance_validate(self, validate):
        self.seen = (self.instance.name, sorted(self.cleaned_data))
        validate()
        self.built = self.instance.name


@pytest.mark.django_db
def test_the_instance_validation_hook_wraps_building_and_validating_the_instance():
    Tenant.objects.create(name="Taken", slug="taken")
    form = TenantForm(data={"name": "Acme", "slug": "taken"})

    assert not form.is_valid()
    # Called after the fields were cleaned, before the instance was built from them...
    assert form.seen == ("", ["name", "slug"])
    # ...and validate() builds it and runs the model's validation (here: the unique slug).
    assert form.built == "Acme"
    assert "slug" in form.errors


def test_admin_registrations_are_the_sites_registered_models_and_admins():
    site = admin.AdminSite(name="probe")
    site.register(Tenant)
    [(model, model_admin)] = admin_registrations(site)
    assert model is Tenant
    assert isinstance(model_admin, admin.ModelAdmin) and model_admin.model is Tenant
    assert site.get_model_admin(Tenant) is model_admin


def test_the_output_stream_is_what_the_wrapper_writes_to():
    stream = io.StringIO()
    wrapper = OutputWrapper(stream)
    wrapper.write("line")
    assert output_stream(wrapper) is stream
    assert stream.getvalue() == "line\n"


def test_a_redis_caches_client_is_built_from_its_client_arguments():
    from django.core.cache.backends.redis import RedisCache, RedisCacheClient

    from chatplatform.django_internals import redis_cache_client_args

    cache = RedisCache("redis://127.0.0.1:6379/3", {"OPTIONS": {"db": 3}})
    servers, options, client_class = redis_cache_client_args(cache)
    assert servers == ["redis://127.0.0.1:6379/3"] and options == {"db": 3}
    assert client_class is RedisCacheClient


def test_a_redis_cache_clients_pool_is_the_one_its_commands_use():
    from django.core.cache.backends.redis import RedisCache

    from chatplatform.django_internals import redis_cache_client_pool

    client = RedisCache("redis://127.0.0.1:6379/3", {})._cache  # type: ignore[attr-defined]
    for write in (True, False):
        pool = redis_cache_client_pool(client, write=write)
        assert client.get_client(write=write).connection_pool is pool
