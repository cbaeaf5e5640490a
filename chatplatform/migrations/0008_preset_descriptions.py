"""The presets' descriptions in product words (what each strategy puts in the prompt), for
databases created before they were written so. The old texts carried a label before these
words (matched by their unchanged ending); a description an operator rewrote is kept."""

from django.db import migrations

DESCRIPTIONS = {
    "Sliding window": (
        ": the newest messages that fit, always the last 20 when they fit.",
        "The newest messages that fit, always the last 20 when they fit.",
    ),
    "Rolling summary": (
        ": summaries of older parts plus the raw messages after the last summary.",
        "Summaries of older parts plus the messages after the last summary, verbatim.",
    ),
}


def forwards(apps, schema_editor):
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    for name, (old_ending, new) in DESCRIPTIONS.items():
        ContextPolicy._base_manager.filter(
            tenant=None, name=name, description__endswith=old_ending
        ).update(description=new)


class Migration(migrations.Migration):
    dependencies = [("chatplatform", "0007_prompt_cache")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
