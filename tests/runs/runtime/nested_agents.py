"""A three-deep agent tree whose innermost tool is gated, run in two real processes.

``python -m tests.runs.runtime.nested_agents suspend STORE_FILE`` starts the run and writes the store's
content with the codec; ``... resume STORE_FILE EFFECTS_FILE APPROVAL_ID TOKEN`` resumes it in a
fresh interpreter. Every execution of the innermost tool appends a line to EFFECTS_FILE.
"""

from __future__ import annotations

import asyncio
import json
import sys

from runs.runtime import agent_tool, generate_text, tool
from runs.runtime.durable import (
    InMemorySessionStore,
    create_approval_signer,
    deserialize_checkpoint,
    resume_from_checkpoint,
    serialize_checkpoint,
)
from runs.runtime.testing import ScriptedModel

SECRET = "nested-secret"


def _call(name, call_id, **tool_input):
    return {"type": "tool_call", "tool_name": name, "tool_call_id": call_id, "input": tool_input}


def _text(text):
    return {"content": [{"type": "text", "text": text}], "usage": {"input_tokens": 1, "output_tokens": 1}}


def _calls(*parts):
    return {"content": list(parts), "usage": {"input_tokens": 1, "output_tokens": 1}}


def _script(first, final, resumed: bool) -> ScriptedModel:
    """On resume each agent's first answer is already in its checkpoint: only its final text is left."""
    return ScriptedModel([final] if resumed else [first, final])


def build_tools(effects_file: str, *, resumed: bool):
    def run_shell(tool_input, ctx):
        with open(effects_file, "a") as handle:
            handle.write(tool_input["command"] + "\n")
        return "exit 0"

    shell = tool(description="Run a command.", execute=run_shell, needs_approval=True)
    operator = agent_tool(name="operator", tools={"run_shell": shell}, max_steps=3, model=_script(
        _calls(_call("run_shell", "s1", command="make test")), _text("operator: tests ran"), resumed))
    coder = agent_tool(name="coder", tools={"operator": operator}, max_steps=3, model=_script(
        _calls(_call("operator", "o1", prompt="run the tests")), _text("coder: fixed"), resumed))
    planner = agent_tool(name="planner", tools={"coder": coder}, max_steps=3, model=_script(
        _calls(_call("coder", "k1", prompt="fix it")), _text("planner: planned"), resumed))
    return {"planner": planner}


def root_model():
    return ScriptedModel([_calls(_call("planner", "p1", prompt="plan the fix")), _text("root: all done")])


def dump(store: InMemorySessionStore, path: str) -> None:
    with open(path, "w") as handle:
        json.dump({run_id: serialize_checkpoint(store.load(run_id)) for run_id in store.list()}, handle)


def restore(path: str) -> InMemorySessionStore:
    store = InMemorySessionStore()
    with open(path) as handle:
        for text in json.load(handle).values():
            store.save(deserialize_checkpoint(text))
    return store


async def suspend(store_file: str, effects_file: str) -> None:
    store = InMemorySessionStore()
    result = await generate_text(model=root_model(), messages=[{"role": "user", "content": "fix the build"}],
                                 tools=build_tools(effects_file, resumed=False), max_steps=3, session={"store": store, "run_id": "root"},
                                 approval_signer=create_approval_signer(secret=SECRET))
    dump(store, store_file)
    print(json.dumps({"finish_reason": result.finish_reason, "pending": result.pending_approvals}))


async def resume(store_file: str, effects_file: str, approval_id: str, token: str) -> None:
    store = restore(store_file)
    result = await resume_from_checkpoint(store, "root", model=ScriptedModel([_text("root: all done")]),
                                          tools=build_tools(effects_file, resumed=True), max_steps=3,
                                          approval_responses=[{"approval_id": approval_id, "approved": True, "token": token}],
                                          approval_signer=create_approval_signer(secret=SECRET))
    dump(store, store_file)
    print(json.dumps({"finish_reason": result.finish_reason, "text": result.text, "runs": sorted(store.list())}))


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    asyncio.run({"suspend": suspend, "resume": resume}[command](*args))
