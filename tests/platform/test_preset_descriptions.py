"""The presets describe their strategy in product words, on new databases and, by a data
migration, on databases that stored the earlier labelled texts."""

from importlib import import_module

import pytest
from django.apps import apps

from chatplatform.models import ContextPolicy

pytestmark = pytest.mark.django_db

migration = import_module("chatplatform.migrations.0008_preset_descriptions")


def presets() -> dict[str, str]:
    return dict(ContextPolicy._base_manager.filter(tenant=None).values_list("name", "description"))


def test_new_databases_describe_presets_in_product_words():
    for name, (_, text) in migration.DESCRIPTIONS.items():
        assert presets()[name] == text


def test_earlier_texts_are_rewritten_and_an_operator_edit_is_kept():
    base = ContextPolicy._base_manager.filter(tenant=None)
    base.filter(name="Sliding window").update(
        description="Old label" + migration.DESCRIPTIONS["Sliding window"][0]
    )
    base.filter(name="Rolling summary").update(description="Our own words for this preset.")
    migration.forwards(apps, None)
    assert presets()["Sliding window"] == migration.DESCRIPTIONS["Sliding window"][1]
    assert presets()["Rolling summary"] == "Our own words for this preset."
