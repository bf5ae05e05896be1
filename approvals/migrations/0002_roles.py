"""The service's roles as groups: support (reads every run) and reviewers (also decides and resolves)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

ROLES = {
    "support": [
        "runs.view_every_run", "runs.view_run", "runs.view_leg", "runs.view_checkpoint", "runs.view_effect",
        "runs.view_journalentry", "approvals.view_approvalrequest",
    ],
}
ROLES["reviewers"] = [*ROLES["support"], "approvals.decide_approvalrequest", "runs.resolve_effect"]


def roles_create(apps, schema_editor):
    # Permissions are normally created after all migrations ran; these groups need them now.
    for label in ("runs", "approvals"):
        config = apps.get_app_config(label)
        config.models_module = True  # the migration state's app stub has no models module of its own
        create_permissions(config, apps=apps, verbosity=0)
        config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, codes in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        for code in codes:
            app_label, codename = code.split(".")
            group.permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0001_initial"),
        ("runs", "0005_roles_permissions"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(roles_create, migrations.RunPython.noop)]
