"""One index a history table (issue 8): each index is one more page a checkpoint's save writes.

The messages' and checkpoints' indexes are led by the run, then the session key; the run's own foreign-key
index and the session key's are dropped, and the links inside a history (a message's parent, a checkpoint's
head) lose their index and their constraint. The plain indexes are dropped by name: an AlterField of
``db_index`` would rebuild the table on SQLite and drop and re-add the run's foreign key on PostgreSQL, which
checks every row again under a lock that stops the workers' writes.
"""

import django.db.models.deletion
from django.db import migrations, models


def _plain_indexes(model_name, column):
    """Forward: drop the non-unique indexes on exactly ``column`` (PostgreSQL's ``LIKE`` twin included).
    Backward: make the field's indexes again, as ``db_index=True`` makes them."""

    def forward(apps, schema_editor):
        model = apps.get_model("runs", model_name)
        for name in schema_editor._constraint_names(model, [column], index=True, unique=False, primary_key=False):
            schema_editor.execute(schema_editor._delete_index_sql(model, name))

    def backward(apps, schema_editor):
        model = apps.get_model("runs", model_name)  # the state before this migration: the field still indexed
        field = next(field for field in model._meta.local_fields if field.column == column)
        for statement in schema_editor._field_indexes_sql(model, field):
            schema_editor.execute(statement)

    return migrations.RunPython(forward, backward)


def _unindexed(model_name, field_name, field, column):
    """The field's ``db_index=False`` in the migration state; in the database, its plain indexes dropped."""
    return migrations.SeparateDatabaseAndState(
        state_operations=[migrations.AlterField(model_name=model_name, name=field_name, field=field)],
        database_operations=[_plain_indexes(model_name, column)],
    )


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0010_effect_ledger'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='checkpoint',
            name='checkpoint_latest',
        ),
        _unindexed('checkpoint', 'run', models.ForeignKey(
            db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='checkpoints', to='runs.run',
        ), 'run_id'),
        _unindexed('runmessage', 'run', models.ForeignKey(
            db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='runs.run',
        ), 'run_id'),
        _unindexed('runmessage', 'session_key', models.CharField(max_length=400), 'session_key'),
        # The links lose their constraint too: SQLite rebuilds each table once for that (its indexes as they now
        # stand: none), PostgreSQL drops the constraint and the index.
        migrations.AlterField(
            model_name='checkpoint',
            name='head',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='runs.runmessage'),
        ),
        migrations.AlterField(
            model_name='runmessage',
            name='parent',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='runs.runmessage'),
        ),
        migrations.AlterModelOptions(
            name='checkpoint',
            options={'ordering': ['run_id', 'id']},
        ),
        migrations.AlterModelOptions(
            name='runmessage',
            options={'ordering': ['run_id', 'session_key', 'position', 'id']},
        ),
        migrations.AddIndex(
            model_name='checkpoint',
            index=models.Index(fields=['run', 'session_key', '-id'], name='checkpoint_latest'),
        ),
        migrations.AddIndex(
            model_name='runmessage',
            index=models.Index(fields=['run', 'session_key'], name='message_history'),
        ),
    ]
