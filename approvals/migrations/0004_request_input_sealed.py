"""Approval inputs move from a jsonb column (which refuses NUL and holds inputs in clear) to sealed codec JSON."""

from django.db import migrations, models


def inputs_seal(apps, schema_editor):
    from runs.secrets.sealing import seal_value

    ApprovalRequest = apps.get_model("approvals", "ApprovalRequest")
    for request in ApprovalRequest.objects.only("id", "tool_input").iterator():
        ApprovalRequest.objects.filter(pk=request.pk).update(input_data=seal_value(request.tool_input or {}))


def inputs_unseal(apps, schema_editor):
    from runs.secrets.sealing import unseal_value

    ApprovalRequest = apps.get_model("approvals", "ApprovalRequest")
    for request in ApprovalRequest.objects.only("id", "input_data").iterator():
        ApprovalRequest.objects.filter(pk=request.pk).update(tool_input=unseal_value(request.input_data))


class Migration(migrations.Migration):

    dependencies = [
        ("approvals", "0003_request_cancelled_status"),
    ]

    operations = [
        migrations.AddField(
            model_name="approvalrequest",
            name="input_data",
            field=models.BinaryField(default=bytes, help_text="The tool input, sealed when encryption keys are set."),
        ),
        migrations.RunPython(inputs_seal, inputs_unseal),
        migrations.RemoveField(model_name="approvalrequest", name="tool_input"),
    ]
