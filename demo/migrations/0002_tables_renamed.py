# The sandboxes' tables get the demo app's names (a rename keeps every row), and their content types follow, so
# the permissions granted on them stay granted.

from django.db import migrations

MODELS = ["sandboxpayment", "sandboxcommand"]


def content_types_to(app_label, other):
    def move(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        taken = set(ContentType.objects.filter(app_label=app_label, model__in=MODELS).values_list("model", flat=True))
        ContentType.objects.filter(app_label=other, model__in=MODELS).exclude(model__in=taken).update(
            app_label=app_label)

    return move


class Migration(migrations.Migration):

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("demo", "0001_initial"),
    ]

    operations = [
        migrations.AlterModelTable(name="sandboxpayment", table=None),
        migrations.AlterModelTable(name="sandboxcommand", table=None),
        migrations.RunPython(content_types_to("demo", "runs"), content_types_to("runs", "demo")),
    ]
