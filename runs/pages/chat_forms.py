"""The chat pages' forms: a new chat (an agent and a first message), a message, and a verdict from the chat."""

from __future__ import annotations

from typing import Any

from django import forms

from runs.agents import agent_list

__all__ = ["ChatMessageForm", "ChatStartForm", "ChatVerdictForm"]

MESSAGE_MAX_LENGTH = 20_000
REASON_MAX_LENGTH = 2000


class ChatMessageForm(forms.Form):
    """One user message: the thread's next turn."""

    content = forms.CharField(label="Your message", max_length=MESSAGE_MAX_LENGTH, strip=True,
                              widget=forms.Textarea(attrs={"rows": 3}))


class ChatStartForm(ChatMessageForm):
    """A new chat: any agent the user may start (every registered one that builds), and its first message."""

    agent = forms.ChoiceField(label="Agent")
    field_order = ["agent", "content"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.agents = [agent for agent in agent_list() if agent["problem"] is None]
        self.fields["agent"].choices = [(agent["name"], agent["name"]) for agent in self.agents]
        self.fields["agent"].error_messages["invalid_choice"] = "Unknown agent %(value)s."
        self.fields["content"].label = "First message"


class ChatVerdictForm(forms.Form):
    """Approve or deny a request of the thread's turn; a denial's reason is optional (the agent reads it)."""

    verdict = forms.ChoiceField(choices=[("approve", "Approve"), ("deny", "Deny")])
    reason = forms.CharField(label="Reason (optional)", required=False, strip=True, max_length=REASON_MAX_LENGTH)
