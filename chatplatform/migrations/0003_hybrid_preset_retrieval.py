"""The Hybrid preset retrieves up to 200 items, with neighbours as items of their own.

``retrieval_max_items=8`` left most of the 6,000-token retrieval budget unused (a retrieved
line is ~50 tokens): the LoCoMo evaluation packs ~70-100 lines into 3,400 tokens. Ranked
neighbours already come as items (the retriever scores the turns around each hit), so the
packer's extra ``retrieval_neighbors`` would spend budget on unranked turns. Only a preset
still holding the old defaults is changed: an operator's edit is kept.
"""

from django.db import migrations

NEW = {"retrieval_max_items": 200, "retrieval_neighbors": 0}
OLD = {"retrieval_max_items": 8, "retrieval_neighbors": 1}


def forwards(apps, schema_editor):
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    ContextPolicy._base_manager.filter(tenant=None, name="Hybrid", **OLD).update(**NEW)


def backwards(apps, schema_editor):
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    ContextPolicy._base_manager.filter(tenant=None, name="Hybrid", **NEW).update(**OLD)


class Migration(migrations.Migration):
    dependencies = [("chatplatform", "0002_presets")]
    operations = [migrations.RunPython(forwards, backwards)]
