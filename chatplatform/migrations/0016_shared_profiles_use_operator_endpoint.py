"""The shared OpenAI-compatible profile seeded with ``http://localhost:11434/v1`` takes the
operator's endpoint instead (``OPENAI_BASE_URL``): an empty base URL on a shared profile means
the platform's endpoint. A base URL the operator set on the profile since is kept."""

from django.db import migrations

SEEDED_URL = "http://localhost:11434/v1"


def forwards(apps, schema_editor):
    ModelProfile = apps.get_model("chatplatform", "ModelProfile")
    ModelProfile._base_manager.filter(tenant=None, provider="openai", base_url=SEEDED_URL).update(
        base_url=""
    )


class Migration(migrations.Migration):
    dependencies = [("chatplatform", "0015_server_compaction")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
