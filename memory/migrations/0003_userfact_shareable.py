from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0002_userfact_ended_reason"),
    ]

    operations = [
        migrations.AddField(
            model_name="userfact",
            name="shareable",
            field=models.BooleanField(
                default=False,
                help_text="The fact may be used in replies the other members of a group chat "
                "read. Off (private): it is used only in the owner's one-to-one conversations.",
            ),
        ),
    ]
