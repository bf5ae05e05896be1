"""A tool call's input is checked against the tool's input_schema before anything is asked or run: an invalid one
is an is_error result naming the fields, so the model can correct itself; it never becomes an approval request."""

from __future__ import annotations


from runs.runtime import generate_text, tool
from runs.runtime.durable import InMemorySessionStore
from runs.runtime.testing import ScriptedModel

PAYMENT_SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "string"}, "recipient": {"type": "string"}},
    "required": ["amount", "recipient"],
    "additionalProperties": False,
}


def calling(tool_input, then="done"):
    """A model that calls ``pay`` with ``tool_input`` once, then answers with the result it read."""

    def policy(request):
        results = [part for message in request["messages"] if message["role"] == "tool" for part in message["content"]]
        if not results:
            return {"content": [{"type": "tool_call", "tool_name": "pay", "input": tool_input}]}
        return {"content": [{"type": "text", "text": f"{then}: {results[-1]['output']}"}]}

    return ScriptedModel([policy] * 3)


async def call_pay(tool_input, **options):
    paid = []
    pay = tool(name="pay", input_schema=PAYMENT_SCHEMA, execute=lambda i, ctx: paid.append(i) or "paid", **options)
    result = await generate_text(model=calling(tool_input), messages=[{"role": "user", "content": "pay"}],
                                 tools={"pay": pay}, max_steps=3, session={"store": InMemorySessionStore()})
    parts = [part for message in result.messages if message["role"] == "tool" for part in message["content"]]
    return result, parts[0], paid


async def test_a_valid_input_runs():
    _, part, paid = await call_pay({"amount": "84.20", "recipient": "Ada"})
    assert (part["is_error"], paid) == (False, [{"amount": "84.20", "recipient": "Ada"}])


async def test_an_invalid_input_is_an_error_result_naming_the_fields_and_nothing_runs():
    _, part, paid = await call_pay({"amount": 84.2, "note": "x"})
    assert part["is_error"] and paid == []
    assert "amount: 84.2 is not of type 'string'" in part["output"]
    assert "'recipient' is a required property" in part["output"]
    assert "'note' was unexpected" in part["output"]


async def test_a_gated_call_with_an_invalid_input_asks_nobody():
    result, part, paid = await call_pay({"amount": "84.20"}, needs_approval=True)
    assert result.pending_approvals == [] and result.finish_reason == "stop"
    assert part["is_error"] and "'recipient' is a required property" in part["output"] and paid == []


async def test_the_model_reads_the_problem_and_can_correct_itself():
    result, _, _ = await call_pay({"amount": "84.20"})
    assert result.text.startswith("done: The input does not match the tool's input schema")


def test_a_schema_error_names_the_field_without_echoing_a_huge_value():
    pay = tool(name="pay", input_schema=PAYMENT_SCHEMA, execute=lambda i, ctx: "paid")
    problem = pay.input_problem({"amount": ["x" * 1000] * 100, "recipient": "Ada"})
    assert problem.startswith("The input does not match the tool's input schema: amount: ")
    assert "is not of type 'string'" in problem and len(problem) < 500
