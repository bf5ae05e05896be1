# The sandboxes' tables were the runs app's (runs 0001, 0010): this takes them over as they are, in the migration
# state only (no table is created), so their rows stay; 0002 renames the tables into the demo app.

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("runs", "0011_history_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="SandboxPayment",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("operation_id", models.CharField(max_length=300, unique=True)),
                        ("fingerprint", models.CharField(max_length=64)),
                        ("request", models.JSONField()),
                        ("transaction_id", models.CharField(max_length=40)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={"ordering": ["-created_at"], "db_table": "runs_sandboxpayment"},
                ),
                migrations.CreateModel(
                    name="SandboxCommand",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("operation_id", models.CharField(db_index=True, max_length=500)),
                        ("command", models.TextField()),
                        ("exit_code", models.IntegerField()),
                        ("output", models.TextField()),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={"ordering": ["-created_at", "-id"], "db_table": "runs_sandboxcommand"},
                ),
            ],
            database_operations=[],
        ),
    ]
