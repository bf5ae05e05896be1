"""The AI SDK chat wire against a live `manage.py serve` (daphne and its worker), driven by the real `ai` package
(tests/runs/wire/chat_transport.mjs): DefaultChatTransport sends only the last message, readUIMessageStream builds
the answer. A turn with text, tool outputs and an approval request; the approval answered from the chat continues
it; reconnectToStream mid-turn replays and tails it with nothing lost or doubled, and answers 204 once it is over;
a second turn is sent the first turn's tool calls and results (read from what the scripted model was sent)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from approvals.models import ApprovalRequest
from deuz_project.database_url import database_url
from runs.models import Run
from tests.browser.serving import ServeProcess
from tests.environment import PRODUCTION_ENV, REPO_ROOT, clean_env
from tests.factories import make_user, token_of
from tests.runs.wire.chat_agents import LOG_VARIABLE

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = "tests/runs/wire/chat_transport.mjs"


@pytest.fixture
def chat_log(tmp_path):
    return tmp_path / "model-requests.jsonl"


@pytest.fixture
def server(transactional_db, chat_log):
    """`manage.py serve` (one worker) on this test's database, with the chat probe agent."""
    environment = clean_env(
        DATABASE_URL=database_url(), DEUZ_DEMO_DELAY_MS="40", **PRODUCTION_ENV,
        DEUZ_AGENTS=json.dumps({"chatprobe": "tests.runs.wire.chat_agents.chat_probe_agent"}),
        **{LOG_VARIABLE: str(chat_log)},
    )
    if os.environ.get("REDIS_URL"):
        environment["REDIS_URL"] = os.environ["REDIS_URL"]
    process = ServeProcess(env=environment)
    yield process
    process.stop()


@pytest.fixture
def client(server):
    """Run an action of chat_transport.mjs as Olga against the server; answers what the `ai` package read."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("The AI SDK tests need Node.js: `apt-get install -y nodejs` (.ci/run does).")
    if not (REPO_ROOT / "node_modules" / "ai").is_dir():
        pytest.fail("The ai package is not installed: run `npm ci` (scripts/test does).")
    token = token_of(make_user("olga"))

    def act(action: str, **given) -> dict:
        sent = {"action": action, "base": server.url, "token": token, "chatId": "chat-1", **given}
        completed = subprocess.run([node, SCRIPT], input=json.dumps(sent), cwd=REPO_ROOT, capture_output=True,
                                   text=True, timeout=120)
        assert completed.returncode == 0, completed.stderr + "".join(server.output[-30:])
        return json.loads(completed.stdout)

    return act


def parts(message: dict, kind: str) -> list[dict]:
    return [part for part in message["parts"] if part["type"] == kind]


def text_of(message: dict) -> str:
    return "".join(part["text"] for part in parts(message, "text"))


def test_a_sent_message_is_answered_with_text_tool_outputs_and_an_approval_request(client):
    read = client("send", text="gated alpha", agent="chatprobe")
    message, approval = read["message"], ApprovalRequest.objects.get(run__thread__thread_id="chat-1")
    assert (message["id"], message["role"], read["errors"]) == (approval.run.run_id, "assistant", [])
    assert text_of(message) == "Looking that up.May I act on it?"
    lookup, act = parts(message, "tool-lookup")[0], parts(message, "tool-act")[0]
    assert (lookup["state"], lookup["output"]) == ("output-available", {"found": "facts about gated alpha"})
    assert (act["state"], act["approval"]) == ("approval-requested", {"id": approval.approval_id})


def test_the_approval_answered_from_the_chat_continues_the_turn(client):
    asked = client("send", text="gated alpha", agent="chatprobe")["message"]
    read = client("answer", message=asked, approved=True)
    message = read["message"]
    assert ApprovalRequest.objects.get(run__thread__thread_id="chat-1").status in ("approved", "used")
    act = parts(message, "tool-act")[0]
    assert (act["state"], act["output"]) == ("output-available", {"done": "gated alpha"})
    assert text_of(message).startswith("Looking that up.May I act on it?Answered 'gated alpha': word0")
    assert text_of(message).endswith("word29.")  # each text once: the answer went on from the verdict
    assert "tool-approval-request" not in [chunk["type"] for chunk in read["chunks"]]
    assert Run.objects.get(thread__thread_id="chat-1").status == Run.Status.COMPLETED


def test_reconnecting_mid_turn_replays_and_tails_it_with_nothing_lost_or_doubled(client):
    read = client("send-and-reconnect", text="plain beta", agent="chatprobe")
    sent, reconnected = read["sent"], read["reconnected"]
    assert reconnected["message"] is not None  # the turn was active (else a 204 and no message)
    assert reconnected["message"] == sent["message"]
    assert text_of(reconnected["message"]).endswith("word29.")
    deltas = [[chunk["delta"] for chunk in read[name]["chunks"] if chunk["type"] == "text-delta"]
              for name in ("sent", "reconnected")]
    assert deltas[0] == deltas[1]
    assert reconnected["chunks"][-1] == {"type": "finish", "finishReason": "stop"}


def test_after_the_turn_reconnecting_answers_204(client):
    client("send", text="plain gamma", agent="chatprobe")
    assert client("reconnect") == {"message": None}


def test_a_second_turn_is_sent_the_first_turns_tool_calls_and_results(client, chat_log):
    client("send", text="plain one", agent="chatprobe")
    second = client("send", text="plain two")  # no agent: the chat's thread has it
    assert text_of(second["message"]).startswith("Looking that up.Answered 'plain two'")
    requests = [json.loads(line) for line in chat_log.read_text().splitlines()]
    (first_of_second,) = [messages for messages in requests if messages[-1] == {"role": "user", "content": "plain two"}]
    results = [part for message in first_of_second if message["role"] == "tool" for part in message["content"]]
    calls = [part for message in first_of_second if message["role"] == "assistant"
             and isinstance(message["content"], list) for part in message["content"] if part["type"] == "tool_call"]
    assert [result["output"] for result in results] == [{"found": "facts about plain one"}]
    assert [call["tool_call_id"] for call in calls] == [results[0]["tool_call_id"]]


def test_the_example_terminal_chat_talks_to_the_assistant_and_answers_its_approval(server):
    token = token_of(make_user("olga"))
    completed = subprocess.run(
        [shutil.which("node") or "node", "examples/ai-sdk-chat/chat.mjs", "assistant", "example-chat"],
        input="Tell Ada the build is green\ny\nWhat did you send?\n\n", cwd=REPO_ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "DEUZ_URL": server.url, "DEUZ_TOKEN": token})
    assert completed.returncode == 0, completed.stderr
    assert "Approve send_message" in completed.stdout
    assert "Sent to Ada Lovelace" in completed.stdout
    # The second turn answers from the first's tool result, which the thread kept.
    assert 'In this conversation I sent 1 message(s): to ada@example.test: "The build is green"' in completed.stdout


@pytest.mark.parametrize(("token", "says"), [("", "Set DEUZ_TOKEN"), ("deuz_not-a-key", "answered 401")])
def test_the_example_without_a_valid_token_says_so_instead_of_starting_a_chat(server, token, says):
    completed = subprocess.run(
        [shutil.which("node") or "node", "examples/ai-sdk-chat/chat.mjs", "assistant", "example-chat"],
        input="Tell Ada the build is green\n\n", cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "DEUZ_URL": server.url, "DEUZ_TOKEN": token})
    assert completed.returncode != 0
    assert says in completed.stderr
    assert "\n    at " not in completed.stderr  # a sentence, not a stack trace
    assert "earlier messages" not in completed.stdout  # an unreadable chat is not taken for a new one


def test_the_example_leaves_a_reviewers_approval_to_a_reviewer(server):
    completed = subprocess.run(
        [shutil.which("node") or "node", "examples/ai-sdk-chat/chat.mjs", "reimbursement", "example-chat"],
        input="Reimburse exp-1042\ny\n\n", cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "DEUZ_URL": server.url, "DEUZ_TOKEN": token_of(make_user("olga"))})
    assert completed.returncode == 0, completed.stderr
    assert "A reviewer decides this in the console" in completed.stdout
    assert "Approve pay_expense" not in completed.stdout  # not asked what it may not answer (a 403)
    assert ApprovalRequest.objects.get(run__thread__thread_id="example-chat").status == "pending"
