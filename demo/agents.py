"""The built-in demo agents, on ScriptedModel so the project runs with no API key.

Their scripts are policies: each answer is a function of the history the model is shown, so a leg that
resumes in another process (a new ScriptedModel) continues the same conversation. In a thread, the history is
the whole conversation: a policy works on the latest user message with the tool results of the current turn, and
answers a follow-up that asks for nothing new from the results of the earlier turns.
"""

from __future__ import annotations

import hashlib
import os
import re
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from runs.agents import AgentDefinition, LegContext, db_tool
from demo.sandbox import (
    CONTACTS,
    sandbox_contact,
    sandbox_expense,
    sandbox_message_lookup,
    sandbox_message_send,
    sandbox_pay,
    sandbox_payment_lookup,
    sandbox_shell,
    sandbox_shell_lookup,
)
from runs.runtime import Effect, EffectCall, agent_tool, tool
from runs.runtime.mcp import mcp_server, mcp_tools
from runs.runtime.providers import AnthropicModel, OpenAIChatModel
from runs.runtime.testing import ScriptedModel

__all__ = ["assistant_agent", "coder_agent", "files_agent", "reimbursement_agent"]

_USAGE = {"input_tokens": 120, "output_tokens": 40}


def _results(request: dict[str, Any], *, whole_thread: bool = False) -> dict[str, dict[str, Any]]:
    """Tool results of the current turn (after the latest user message), latest per tool name; with
    ``whole_thread``, of the whole history."""
    messages = request["messages"] if whole_thread else request["messages"][_last_user_index(request) + 1:]
    found: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message["role"] == "tool":
            for part in message["content"]:
                found[part["tool_name"]] = part
    return found


def _last_user_index(request: dict[str, Any]) -> int:
    users = [index for index, message in enumerate(request["messages"]) if message["role"] == "user"]
    return users[-1] if users else -1


def _last_user_text(request: dict[str, Any]) -> str:
    """The latest user message's text: what the current turn asks."""
    index = _last_user_index(request)
    if index < 0:
        return ""
    content = request["messages"][index]["content"]
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)


def _is_follow_up(request: dict[str, Any]) -> bool:
    """The history holds an earlier turn (a user message before the latest)."""
    return sum(message["role"] == "user" for message in request["messages"]) > 1


def _say(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}, *calls], "usage": _USAGE}


def _call(tool_name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_call", "tool_name": tool_name, "input": tool_input}


def _scripted(policy, steps: int) -> Any:
    """The scripted policy by default; the configured real provider when DEUZ_DEMO_MODEL names one.

    A model is built per leg; models of one configuration share their SDK client per event loop.
    """
    provider, _, model_id = settings.DEUZ_DEMO_MODEL.partition(":")
    options = {
        "timeout": settings.DEUZ_MODEL_TIMEOUT_SECONDS,
        "max_retries": settings.DEUZ_MODEL_MAX_RETRIES,
        "max_tokens": settings.DEUZ_MODEL_MAX_TOKENS,
        "temperature": settings.DEUZ_MODEL_TEMPERATURE,
        "extra_headers": settings.DEUZ_MODEL_EXTRA_HEADERS or None,
    }
    if provider == "anthropic":
        model_class, key_variable, base_url = AnthropicModel, "ANTHROPIC_API_KEY", settings.DEUZ_ANTHROPIC_BASE_URL
        options["prompt_caching"] = settings.DEUZ_ANTHROPIC_PROMPT_CACHING
    elif provider == "openai":
        model_class, key_variable, base_url = OpenAIChatModel, "OPENAI_API_KEY", settings.DEUZ_OPENAI_BASE_URL
        options["include_usage"] = settings.DEUZ_OPENAI_STREAM_USAGE
    else:
        # record=False: a leg keeps no deep copy of every request it sent (nothing reads them back).
        return ScriptedModel([policy] * (steps + 1), model_id="deuz-demo-scripted",
                             delay_ms=settings.DEUZ_DEMO_DELAY_MS, record=False)
    return model_class(model_id, api_key=os.environ.get(key_variable) or None, base_url=base_url, **options)


# --------------------------------------------------------------- reimbursement


def _reimbursement_policy(request: dict[str, Any]) -> dict[str, Any]:
    match = re.search(r"exp-\d+", _last_user_text(request))
    if match is None and _is_follow_up(request):
        return _reimbursement_recall(request)
    results = _results(request)
    expense_id = match.group(0) if match else "exp-1042"
    lookup = results.get("lookup_expense")
    if lookup is None:
        return _say(f"Let me look up expense {expense_id} first.", _call("lookup_expense", expense_id=expense_id))
    if lookup["is_error"]:
        return _say(f"I could not find expense {expense_id}: {lookup['output']}")
    expense = lookup["output"]
    payment = results.get("pay_expense")
    if payment is None:
        return _say(
            f"Expense {expense_id} is {expense['amount']} {expense['currency']} for {expense['employee']} "
            f"({expense['description']}), {expense['status']}. I will pay it; a reviewer must approve the payment.",
            _call("pay_expense", expense_id=expense_id, amount=expense["amount"], currency=expense["currency"],
                  recipient=expense["employee"]),
        )
    if payment["is_error"]:
        return _say(f"The payment was not made: {payment['output']}")
    receipt = payment["output"]
    replayed = receipt.get("replayed_from") if isinstance(receipt, dict) else None
    if replayed:
        return _say(
            f"Expense {expense_id} was already paid by run {replayed['run_id']} at {_when(replayed.get('performed_at'))}: "
            f"{receipt['amount']} {receipt['currency']} to {receipt['recipient']}, transaction "
            f"{receipt['transaction_id']}. Nothing was paid again."
        )
    return _say(
        f"Paid {receipt['amount']} {receipt['currency']} to {receipt['recipient']}; "
        f"transaction {receipt['transaction_id']}."
    )


def _reimbursement_recall(request: dict[str, Any]) -> dict[str, Any]:
    """A follow-up that names no expense: what the earlier turns looked up and paid, from their tool results."""
    earlier = _results(request, whole_thread=True)
    payment, lookup = earlier.get("pay_expense"), earlier.get("lookup_expense")
    if payment is not None and not payment["is_error"]:
        receipt = payment["output"]
        return _say(
            f"Earlier in this conversation I paid {receipt['amount']} {receipt['currency']} to {receipt['recipient']} "
            f"for expense {receipt['expense_id']}, transaction {receipt['transaction_id']}. I have paid nothing since."
        )
    if payment is not None:
        return _say(f"I have paid nothing: the payment was not made ({payment['output']}).")
    if lookup is not None and not lookup["is_error"]:
        expense = lookup["output"]
        return _say(f"I looked up expense {expense['expense_id']} ({expense['amount']} {expense['currency']} for "
                    f"{expense['employee']}) but have paid nothing.")
    return _say("I have paid nothing in this conversation. Name an expense to reimburse, e.g. exp-1042.")


def _when(ms: Any) -> str:
    """A ledger time (ms) as people read it."""
    if not isinstance(ms, int):
        return "an earlier time"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _lookup_expense(tool_input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    expense = sandbox_expense(str(tool_input.get("expense_id", "")))
    if expense is None:
        raise LookupError(f"No expense {tool_input.get('expense_id')!r} in the sandbox books.")
    return expense


def _payment_request(tool_input: dict[str, Any]) -> dict[str, Any]:
    """What identifies a payment: the expense, the exact amount, the currency and the recipient."""
    return {
        "expense_id": str(tool_input.get("expense_id", "")),
        "amount": str(tool_input.get("amount", "")),
        "currency": str(tool_input.get("currency", "")),
        "recipient": str(tool_input.get("recipient", "")),
    }


def _pay_expense(tool_input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    # The operation id is the provider's idempotency key: the business operation, pay_expense:<expense>-v1, the same
    # in every run that pays this expense (and across crashes).
    return sandbox_pay(operation_id=ctx.effect.operation_id, **_payment_request(tool_input))


def _payment_key(tool_input: dict[str, Any]) -> str:
    """The business operation of a payment: this expense's first payment (the third design document's
    "exp-1042-v1"), whichever run asks for it."""
    return f"{tool_input.get('expense_id', '')}-v1"


def _payment_reconcile(call: EffectCall) -> dict[str, Any] | None:
    return sandbox_payment_lookup(operation_id=call.operation_id)


def _payment_verify(call: EffectCall, receipt: Any) -> bool:
    """Read the payment back from the provider: the same transaction, amount, currency and recipient."""
    found = sandbox_payment_lookup(operation_id=call.operation_id)
    if found is None or not isinstance(receipt, dict):
        return False
    asked = _payment_request(call.input)
    return found.get("transaction_id") == receipt.get("transaction_id") and all(
        found.get(key) == value for key, value in asked.items())


PAYMENT_EFFECT = Effect(
    reconcile=db_tool(_payment_reconcile), verify=db_tool(_payment_verify), fingerprint=_payment_request,
    operation_key=_payment_key,
)


def reimbursement_agent(*, leg: LegContext | None = None) -> AgentDefinition:
    """Looks up an expense and pays it through an approval-gated, idempotent sandbox payment tool."""
    return AgentDefinition(
        name="reimbursement",
        description="Pays an approved expense; every payment waits for a reviewer.",
        system="You reimburse approved expenses. Look the expense up, then pay exactly that amount.",
        max_steps=6,
        model=_scripted(_reimbursement_policy, 6),
        tools={
            "lookup_expense": tool(
                description="Read an expense from the books.",
                input_schema={"type": "object", "properties": {"expense_id": {"type": "string"}},
                              "required": ["expense_id"]},
                execute=db_tool(_lookup_expense),
            ),
            "pay_expense": tool(
                description="Pay an expense to its employee. Needs a reviewer's approval.",
                input_schema={
                    "type": "object",
                    "properties": {"expense_id": {"type": "string"}, "amount": {"type": "string"},
                                   "currency": {"type": "string"}, "recipient": {"type": "string"}},
                    "required": ["expense_id", "amount", "currency", "recipient"],
                },
                execute=db_tool(_pay_expense),
                needs_approval=True,
                effect=PAYMENT_EFFECT,
            ),
        },
    )


# ----------------------------------------------------------------------- coder


def _lead_policy(request: dict[str, Any]) -> dict[str, Any]:
    report = _results(request).get("coder")
    earlier = _results(request, whole_thread=True).get("coder")
    task = _last_user_text(request)
    if report is None and earlier is not None and not re.search(r"\b(fix|run|test)", task, re.IGNORECASE):
        return _say(f"Earlier in this conversation the coder reported: {earlier['output']}")
    if report is None:
        task = task or "Fix the failing test."
        return _say("I will hand this to the coder.", _call("coder", prompt=task))
    if report["is_error"]:
        return _say(f"The coder could not finish: {report['output']}")
    return _say(f"The coder reports: {report['output']}")


def _coder_policy(request: dict[str, Any]) -> dict[str, Any]:
    shell = _results(request).get("run_shell")
    if shell is None:
        return _say("Running the test suite in the sandbox.", _call("run_shell", command="pytest -q tests/test_math.py"))
    if shell["is_error"]:
        return _say(f"I could not run the tests: {shell['output']}")
    return _say(f"Ran `{shell['output']['command']}`: {shell['output']['output'].splitlines()[-1]}.")


def _run_shell(tool_input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return sandbox_shell(str(tool_input.get("command", "")), operation_id=ctx.effect.operation_id)


def _shell_reconcile(call: EffectCall) -> dict[str, Any] | None:
    return sandbox_shell_lookup(operation_id=call.operation_id)


#: A command is an effect too: it runs at most once per operation, and a crash is reconciled with the shell's log.
SHELL_EFFECT = Effect(reconcile=db_tool(_shell_reconcile))


def coder_agent(*, leg: LegContext | None = None) -> AgentDefinition:
    """A lead agent delegating to a ``coder`` sub-agent whose sandboxed ``run_shell`` needs approval."""
    coder = agent_tool(
        name="coder",
        description="A coding sub-agent that can run shell commands in a sandbox.",
        model=_scripted(_coder_policy, 4),
        max_steps=4,
        system="You fix code. Run the tests to check your work.",
        tools={
            "run_shell": tool(
                description="Run a shell command in the sandbox. Needs a reviewer's approval.",
                input_schema={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
                execute=db_tool(_run_shell),
                needs_approval=True,
                effect=SHELL_EFFECT,
            )
        },
    )
    return AgentDefinition(
        name="coder",
        description="A lead agent with a coder sub-agent; every shell command waits for a reviewer.",
        system="You lead a coding task and delegate the work to the coder.",
        max_steps=4,
        model=_scripted(_lead_policy, 4),
        tools={"coder": coder},
    )


# ----------------------------------------------------------------- files: a real MCP server

_FILES_NOTES = "notes.txt"
_FILES_SUMMARY = "summary.txt"


def _files_folder() -> str:
    """The sandbox folder the filesystem server may touch, with a note to read on first use."""
    folder = settings.DEUZ_DEMO_FILES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    notes = folder / _FILES_NOTES
    if not notes.exists():
        notes.write_text("Ship the MCP demo.\nReview the effect ledger.\nWater the plants.\n")
    return str(folder.resolve())


def _files_policy(folder: str):
    def policy(request: dict[str, Any]) -> dict[str, Any]:
        results = _results(request)
        written_before = _results(request, whole_thread=True).get("write_file")
        if not results and written_before is not None and not written_before["is_error"]:
            return _say(f"Earlier in this conversation I wrote {_FILES_SUMMARY}: {written_before['output']}")
        listing = results.get("list_directory")
        if listing is None:
            return _say("Let me see what is in the sandbox folder.", _call("list_directory", path=folder))
        if listing["is_error"]:
            return _say(f"I could not list the folder: {listing['output']}")
        notes = results.get("read_text_file")
        if notes is None:
            return _say("There are notes; reading them.", _call("read_text_file", path=f"{folder}/{_FILES_NOTES}"))
        if notes["is_error"]:
            return _say(f"I could not read the notes: {notes['output']}")
        text = notes["output"].get("content", "") if isinstance(notes["output"], dict) else str(notes["output"])
        items = [line.strip() for line in text.splitlines() if line.strip()]
        written = results.get("write_file")
        if written is None:
            summary = f"{len(items)} items: " + "; ".join(items)
            return _say(
                f"The notes hold {len(items)} items. I will write a summary; a reviewer must approve the write.",
                _call("write_file", path=f"{folder}/{_FILES_SUMMARY}", content=summary + "\n"),
            )
        if written["is_error"]:
            return _say(f"The summary was not written: {written['output']}")
        return _say(f"Wrote {_FILES_SUMMARY} with the {len(items)} items of {_FILES_NOTES}.")

    return policy


def files_agent(*, leg: LegContext | None = None) -> AgentDefinition:
    """Reads and writes a sandbox folder through @modelcontextprotocol/server-filesystem over stdio: reading needs
    no approval (readOnlyHint), writing waits for a reviewer and goes through the effect ledger."""
    folder = _files_folder()
    server = mcp_server("filesystem", command="node", args=[str(settings.DEUZ_DEMO_FILES_SERVER), folder])
    return AgentDefinition(
        name="files",
        description="Summarises the notes of a sandbox folder through an MCP filesystem server; writing waits for "
                    "a reviewer.",
        system="You keep a sandbox folder tidy. List it, read the notes, then write a summary.",
        max_steps=6,
        model=_scripted(_files_policy(folder), 6),
        tools={"filesystem": mcp_tools(server, include=["list_directory", "read_text_file", "write_file"])},
    )



# -------------------------------------------------------------------- assistant: a chat agent its user directs

_ASKING = r"^\s*(please\s+)?(tell|message|write to|write|send|email|ask)\s+"


def _contact_named(text: str) -> str | None:
    """The first contact of the book the text names, by first name."""
    for word in re.findall(r"[A-Za-z]+", text):
        if word.lower() in CONTACTS:
            return word.lower()
    return None


def _message_body(text: str, first_name: str) -> str:
    """What to send: the text after a colon, or the request without its "tell Ada (Lovelace) (that)" opening."""
    if ":" in text:
        return text.split(":", 1)[1].strip() or text.strip()
    names = [re.escape(CONTACTS[first_name]["name"]), re.escape(first_name)] if first_name in CONTACTS else [r"\w+"]
    body = re.sub(_ASKING + f"({'|'.join(names)})" + r"\s*(that\s+)?", "", text.strip(), flags=re.IGNORECASE)
    return (body[:1].upper() + body[1:]) if body else text.strip()


_QUESTION = re.compile(r"\?\s*$|^\s*(what|which|who|whom|where|when|did|have|has|how)\b", re.IGNORECASE)


def _assistant_recall(request: dict[str, Any], first_name: str) -> dict[str, Any] | None:
    """A follow-up question about a contact an earlier turn looked up, answered from that lookup's result and what
    was sent to them (no new tool call); None when no earlier turn found them."""
    found = [part["output"] for message in request["messages"] if message["role"] == "tool"
             for part in message["content"] if part["tool_name"] == "find_contact" and not part["is_error"]
             and part["output"].get("name") == CONTACTS[first_name]["name"]]
    if not found:
        return None
    contact = found[-1]
    sent = [part["output"] for message in request["messages"] if message["role"] == "tool"
            for part in message["content"] if part["tool_name"] == "send_message" and not part["is_error"]
            and part["output"].get("to") == contact["email"]]
    told = (f" I sent them \"{sent[-1]['body']}\" ({sent[-1]['message_id']})." if sent
            else " I have sent them nothing.")
    return _say(f"{contact['name']}'s address is {contact['email']}, as I looked it up earlier in this "
                f"conversation.{told}")


def _assistant_policy(request: dict[str, Any]) -> dict[str, Any]:
    text = _last_user_text(request)
    results = _results(request)
    first_name = _contact_named(text)
    if not results and first_name is not None and _is_follow_up(request) and _QUESTION.search(text):
        recalled = _assistant_recall(request, first_name)
        if recalled is not None:
            return recalled
    if not results and first_name is None:
        sent = [part["output"] for message in request["messages"] if message["role"] == "tool"
                for part in message["content"] if part["tool_name"] == "send_message" and not part["is_error"]]
        if sent:
            listed = "; ".join(f"to {receipt['to']}: \"{receipt['body']}\" ({receipt['message_id']})" for receipt in sent)
            return _say(f"In this conversation I sent {len(sent)} message(s): {listed}.")
        known = ", ".join(contact["name"] for contact in CONTACTS.values())
        return _say(f"Whom should I write to, and what? I know {known}. Say, e.g., \"Tell Ada the build is green\".")
    lookup = results.get("find_contact")
    if lookup is None:
        return _say(f"Let me look {first_name.capitalize()} up.", _call("find_contact", name=first_name))
    if lookup["is_error"]:
        return _say(f"I could not find that contact: {lookup['output']}")
    contact = lookup["output"]
    sent = results.get("send_message")
    if sent is None and _QUESTION.search(text):
        return _say(f"{contact['name']}'s address is {contact['email']}.")
    if sent is None:
        body = _message_body(text, first_name or "")
        return _say(
            f"{contact['name']} is {contact['email']}. May I send them: \"{body}\"? Approve to send it, deny to stop.",
            _call("send_message", to=contact["email"], body=body),
        )
    if sent["is_error"]:
        return _say(f"I did not send the message to {contact['name']}: {sent['output']}")
    return _say(f"Sent to {contact['name']} ({sent['output']['message_id']}).")


def _find_contact(tool_input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    contact = sandbox_contact(str(tool_input.get("name", "")))
    if contact is None:
        raise LookupError(f"No contact {tool_input.get('name')!r} in the address book.")
    return contact


def _send_message(tool_input: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return sandbox_message_send(operation_id=ctx.effect.operation_id, to=str(tool_input.get("to", "")),
                                body=str(tool_input.get("body", "")))


def _message_key(tool_input: dict[str, Any]) -> str:
    """The business operation of a message: this text to this address, sent once whichever run asks."""
    digest = hashlib.sha256(str(tool_input.get("body", "")).encode()).hexdigest()[:16]
    return f"{tool_input.get('to', '')}:{digest}"


def _message_reconcile(call: EffectCall) -> dict[str, Any] | None:
    return sandbox_message_lookup(operation_id=call.operation_id)


MESSAGE_EFFECT = Effect(reconcile=db_tool(_message_reconcile), operation_key=_message_key)


def assistant_agent(*, leg: LegContext | None = None) -> AgentDefinition:
    """A chat assistant that looks a contact up and asks its own user before it sends them a message (through a
    sandboxed, ledgered outbox): its approvals are decided by the run's creator."""
    return AgentDefinition(
        name="assistant",
        description="Looks up a contact and sends them a message; asks you (its user) before sending.",
        system="You help your user keep in touch. Look the contact up, then send the message they asked for.",
        max_steps=6,
        approvals_decided_by="creator",
        model=_scripted(_assistant_policy, 6),
        tools={
            "find_contact": tool(
                description="Find a contact in the address book by name.",
                input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                execute=db_tool(_find_contact),
            ),
            "send_message": tool(
                description="Send a message to an address. Needs its user's approval.",
                input_schema={"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                              "required": ["to", "body"]},
                execute=db_tool(_send_message),
                needs_approval=True,
                effect=MESSAGE_EFFECT,
            ),
        },
    )
