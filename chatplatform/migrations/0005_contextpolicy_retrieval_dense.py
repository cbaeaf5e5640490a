"""Retrieval by meaning (dense embeddings) as a policy option, off by default, and a preset
"Hybrid + meaning" (the Hybrid preset's settings with it on) that a tenant admin can pick.

The Hybrid preset itself is left as it is: every new tenant starts on it, and its reply path
(and the benchmarks) stay unchanged unless a tenant admin chooses retrieval by meaning.
"""

from django.db import migrations, models

NAME = "Hybrid + meaning"
DESCRIPTION = (
    "Hybrid, with older messages also found by meaning (sentence embeddings fused with "
    "full-text search). Needs the embeddings requirements on the web and worker processes; "
    "without them it behaves like Hybrid."
)


def add_preset(apps, schema_editor):
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    hybrid = ContextPolicy._base_manager.filter(tenant=None, name="Hybrid").first()
    if hybrid is None or ContextPolicy._base_manager.filter(tenant=None, name=NAME).exists():
        return
    hybrid.pk = None
    hybrid.id = None
    hybrid._state.adding = True
    hybrid.name = NAME
    hybrid.description = DESCRIPTION
    hybrid.retrieval_dense = True
    hybrid.save()


def remove_preset(apps, schema_editor):
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    ContextPolicy._base_manager.filter(tenant=None, name=NAME).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('chatplatform', '0004_policy_defaults'),
    ]

    operations = [
        migrations.AddField(
            model_name='contextpolicy',
            name='retrieval_dense',
            field=models.BooleanField(default=False, help_text='Hybrid: also find older messages by meaning (sentence embeddings, all-MiniLM-L6-v2 on the CPU), fused with full-text search. Needs the embeddings requirements (requirements/embeddings.txt) on the web and worker processes; without them retrieval stays full-text only. Messages are embedded in the background; each turn embeds the new message (~10 ms).', verbose_name='retrieval by meaning'),
        ),
        migrations.RunPython(add_preset, remove_preset),
    ]
