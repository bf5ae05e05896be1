# The demo sandboxes' books moved to the demo app (demo 0001 took their tables over as they are): the runs app's
# migration state lets go of them, and no table is touched.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0011_history_indexes"),
        ("demo", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="SandboxPayment"),
                migrations.DeleteModel(name="SandboxCommand"),
            ],
            database_operations=[],
        ),
    ]
