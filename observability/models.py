"""What the journals told, counted: model calls, tool calls and step durations, folded from the runs' journal parts
into tallies that outlive them (observability/tallies.py)."""

from __future__ import annotations

from django.db import models

__all__ = ["JournalFold", "Tally"]


class Tally(models.Model):
    """One counter of a durable fact: how many (``count``), and the sum of their values (``total``: a step's
    seconds), by ``kind``, ``label`` and ``outcome``."""

    class Kind(models.TextChoices):
        MODEL_CALL = "model_call", "Model calls (label: provider)"
        TOOL_CALL = "tool_call", "Tool calls (label: tool name)"
        STEP = "step", "Step durations (label: the histogram bucket's upper bound, +Inf for every step)"

    kind = models.CharField(max_length=20, choices=Kind.choices)
    label = models.CharField(max_length=200)
    outcome = models.CharField(max_length=40, blank=True)
    count = models.PositiveBigIntegerField(default=0)
    total = models.FloatField(default=0.0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "label", "outcome"], name="tally_unique")]

    def __str__(self) -> str:
        return f"{self.kind} {self.label} {self.outcome}: {self.count}"


class JournalFold(models.Model):
    """Where the fold of the journals into tallies stands: one row."""

    last_entry_id = models.BigIntegerField(default=0, help_text="The last journal entry folded (by id).")
    open_steps = models.JSONField(
        default=dict, help_text="The steps started and not finished, by run pk and agent path: [the step-start's "
                                "time in epoch seconds, whether its model call answered].")
    folded_at = models.DateTimeField(null=True, blank=True)
