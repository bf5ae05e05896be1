"""`manage.py agents`: the agents runs can name (the built-in ones and the operator's DEUZ_AGENTS), and
`manage.py agents check`, which builds each one as a leg would and checks its tools, so a broken agent is found
before a run meets it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from jsonschema import SchemaError
from jsonschema.validators import validator_for

from runs.agents import agent_describe, agent_names
from runs.presenters.plain_text import one_line, table

__all__ = ["Command"]


def _tools(described: dict[str, Any]) -> str:
    return ", ".join(
        tool["name"] + ("" if tool["needs_approval"] == "never" else " (approval)") + ("" if tool["effect"] is None
                                                                                      else " (ledger)")
        for tool in described["tools"]
    ) or "(none)"


def _problems(name: str) -> list[str]:
    """What keeps ``name`` from running: its factory failing, or a tool's input schema that is not JSON Schema."""
    try:
        described = agent_describe(name)
    except Exception as exc:  # an import error too: the factory is imported when the agent is built
        return [f"cannot be built: {type(exc).__name__}: {exc}"]
    problems = []
    for tool in described["tools"]:
        schema = tool["input_schema"]
        try:
            validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            problems.append(f"tool {tool['name']}: its input_schema is not a valid JSON Schema: {exc.message}")
    return problems


class Command(BaseCommand):
    help = "List the agents runs can name; `agents check` builds each one and checks its tools."
    #: It reports broken agents itself, each with its problem, rather than stopping at the first system check.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", nargs="?", choices=["list", "check"], default="list",
                            help="list (the default) or check")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "check":
            self.check_agents()
            return
        rows = []
        for name in agent_names():
            try:
                described = agent_describe(name)
            except Exception as exc:
                rows.append((name, f"cannot be built: {type(exc).__name__}: {exc}", "", ""))
                continue
            rows.append((name, one_line(described["description"], limit=60), described["approvals_decided_by"],
                         _tools(described)))
        self.stdout.write(table(["agent", "description", "approvals by", "tools"], rows))

    def check_agents(self) -> None:
        failed = 0
        for name in agent_names():
            problems = _problems(name)
            if problems:
                failed += 1
                self.stdout.write(f"{name}: FAILED")
                for problem in problems:
                    self.stdout.write(f"  - {problem}")
            else:
                self.stdout.write(f"{name}: ok")
        if failed:
            raise CommandError(f"{failed} agent(s) cannot run; see above.")
