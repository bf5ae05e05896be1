"""The AI SDK's UI message stream (runs.wire.ui_messages), rule by rule: each Deuz part's chunks, and the SSE bytes
of a follower's frames. test_ui_messages_ai.py reads real runs' streams with the real `ai` package."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync

from runs.wire.followers import Frame, FrameKind
from runs.wire.ui_messages import (
    UIMessageStreamResponse,
    UIStreamState,
    ui_chunks,
    ui_chunks_end,
    ui_chunks_start,
    ui_message_events,
)

USAGE = {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
SUB = ["coder"]


def state(**options) -> UIStreamState:
    return UIStreamState(message_id="r-42", **options)


def chunks(*parts: dict, start: int = 0, stream: UIStreamState | None = None) -> list[dict]:
    """The chunks of ``parts``, seqs from ``start``, on one stream."""
    stream = stream if stream is not None else state()
    return [chunk for seq, part in enumerate(parts, start) for chunk in ui_chunks(part, seq=seq, state=stream)]


def types(found: list[dict]) -> list[str]:
    return [chunk["type"] for chunk in found]


def delta(text: str, **more) -> dict:
    return {"type": "text-delta", "text": text, **more}


def call(call_id: str = "c1", name: str = "pay", **more) -> dict:
    return {"type": "tool-call", "tool_call_id": call_id, "tool_name": name, "input": {"amount": 1}, **more}


def result(call_id: str = "c1", output=None, *, is_error: bool = False, **more) -> dict:
    return {"type": "tool-result", "tool_call_id": call_id, "tool_name": "pay", "output": output, "is_error": is_error,
            **more}


def request(**approval) -> dict:
    return {"type": "tool-approval-request", "approval": {"approval_id": "a1", "tool_call_id": "c1", "tool_name": "pay",
                                                          "input": {"amount": 1}, **approval}}


def verdict_part(*, approved: bool, **more) -> dict:
    return {"type": "tool-approval-verdict", "approval_id": "a1", "tool_call_id": "c1", "approved": approved,
            "reason": "No." if not approved else "", "decided_by": "rita", "edited": False, **more}


def finish(reason: str) -> dict:
    return {"type": "finish", "finish_reason": reason, "usage": USAGE}


def error(*, retryable: bool) -> dict:
    return {"type": "error", "error": {"name": "RateLimitError", "message": "Slow down."}, "retryable": retryable,
            "retry_after_ms": None}


RETRY = {"type": "retry", "attempt": 1, "max_attempts": 5, "retry_at": 1, "delay_ms": 0, "reason": "rate-limit",
         "message": "Retry scheduled."}


# The message's start


def test_the_start_part_is_a_start_chunk_whose_message_id_is_the_run_id():
    assert chunks({"type": "start", "run_id": "r-42"}) == [{"type": "start", "messageId": "r-42"}]


def test_a_stream_opened_with_its_start_does_not_start_again_at_the_start_part():
    stream = state()
    assert ui_chunks_start(stream) == [{"type": "start", "messageId": "r-42"}]
    assert chunks({"type": "start", "run_id": "r-42"}, stream=stream) == []


# Steps and text


def test_steps_are_start_step_and_finish_step():
    found = chunks({"type": "step-start", "step_index": 0},
                   {"type": "step-finish", "step_index": 0, "usage": USAGE, "finish_reason": "stop"})
    assert found == [{"type": "start-step"}, {"type": "finish-step"}]


def test_text_deltas_are_wrapped_in_a_text_start_and_a_text_end_with_one_id():
    found = chunks({"type": "step-start", "step_index": 0}, delta("Hel"), delta("lo"), finish("stop"))
    assert found[1:5] == [
        {"type": "text-start", "id": "text-1"},
        {"type": "text-delta", "id": "text-1", "delta": "Hel"},
        {"type": "text-delta", "id": "text-1", "delta": "lo"},
        {"type": "text-end", "id": "text-1"},
    ]


def test_text_after_a_tool_call_is_a_text_of_its_own():
    found = chunks(delta("Paying."), call(), delta("Done."))
    assert [chunk["id"] for chunk in found if chunk["type"] == "text-start"] == ["text-0", "text-2"]


def test_a_stream_resumed_mid_text_opens_the_text_it_delivers():
    assert types(chunks(delta("lo"), start=7)) == ["text-start", "text-delta"]


def test_the_stream_end_closes_an_open_text():
    stream = state()
    chunks(delta("cut"), stream=stream)
    assert ui_chunks_end(stream) == [{"type": "text-end", "id": "text-0"}]


# Tool calls, results, approvals


def test_a_tool_call_is_tool_input_available():
    assert chunks(call()) == [{"type": "tool-input-available", "toolCallId": "c1", "toolName": "pay",
                               "input": {"amount": 1}}]


def test_a_tool_call_whose_input_could_not_be_used_is_tool_input_error():
    assert chunks(call(input_error="Not JSON.")) == [{"type": "tool-input-error", "toolCallId": "c1", "toolName": "pay",
                                                      "input": {"amount": 1}, "errorText": "Not JSON."}]


def test_a_tool_result_is_tool_output_available():
    assert chunks(result(output={"paid": True})) == [
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"paid": True}}]


def test_a_failed_tool_result_is_tool_output_error_with_its_output_as_text():
    assert chunks(result(output={"error": "card declined"}, is_error=True)) == [
        {"type": "tool-output-error", "toolCallId": "c1", "errorText": '{"error": "card declined"}'}]


def test_an_approval_request_names_its_approval_id_and_carries_no_token():
    found = chunks(request(token="secret-token"))
    assert found[0] == {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1"}
    assert "secret-token" not in json.dumps(found)


def test_beside_each_approval_request_a_data_chunk_says_who_may_decide_it():
    found = chunks(request(), stream=state(approvals_decided_by="creator"))
    assert found[1] == {"type": "data-deuz-approval", "data": {
        "approval_id": "a1", "tool_call_id": "c1", "tool_name": "pay", "approvals_decided_by": "creator"}}


def test_a_stream_state_refuses_an_unknown_decider():
    with pytest.raises(ValueError, match="approvals_decided_by"):
        state(approvals_decided_by="anyone")


def test_a_verdict_is_a_deuz_data_chunk():
    assert chunks(verdict_part(approved=True)) == [{"type": "data-deuz-tool-approval-verdict", "data": {
        "approval_id": "a1", "tool_call_id": "c1", "approved": True, "reason": "", "decided_by": "rita",
        "edited": False}}]


def test_an_edited_verdicts_data_chunk_carries_the_edit_and_who_and_its_result_the_output():
    edit = {"input": {"amount": "80.00"}, "by": "rita"}
    found = chunks(verdict_part(approved=True, edited=True, edit=edit), result(output={"paid": "80.00"}, edit=edit))
    assert (found[0]["data"]["edited"], found[0]["data"]["edit"]) == (True, edit)
    assert found[1] == {"type": "tool-output-available", "toolCallId": "c1", "output": {"paid": "80.00"}}


def test_the_result_of_a_denied_call_is_tool_output_denied():
    assert chunks(verdict_part(approved=False), result(output="No.", is_error=True))[1:] == [
        {"type": "tool-output-denied", "toolCallId": "c1"}]


def test_the_result_of_an_approved_call_is_its_output():
    assert types(chunks(verdict_part(approved=True), result(output="paid"))[1:]) == ["tool-output-available"]


# Finish reasons


@pytest.mark.parametrize("reason", ["stop", "length", "content-filter", "error"])
def test_a_finish_reason_the_ai_sdk_knows_is_passed_as_it_is(reason):
    assert chunks(finish(reason)) == [{"type": "finish", "finishReason": reason}]


@pytest.mark.parametrize(("reason", "theirs"), [
    ("suspended", "tool-calls"), ("max-steps", "length"), ("cancelled", "other"), ("aborted", "other"),
    ("stop-condition", "other"),
])
def test_a_finish_reason_of_deuz_is_mapped_after_a_data_chunk_naming_it(reason, theirs):
    assert chunks(finish(reason)) == [
        {"type": "data-deuz-finish", "data": {"finish_reason": reason, "usage": USAGE}},
        {"type": "finish", "finishReason": theirs},
    ]


# Errors, retries, recoveries, cancels


def test_an_error_is_an_error_chunk_with_its_name_and_message():
    assert chunks(error(retryable=False)) == [{"type": "error", "errorText": "RateLimitError: Slow down."}]


def test_a_failed_runs_stream_ends_with_an_error_finish():
    stream = state()
    chunks(error(retryable=False), stream=stream)
    assert ui_chunks_end(stream) == [{"type": "finish", "finishReason": "error"}]


def test_a_retryable_error_a_retry_follows_is_a_deuz_data_chunk_not_an_error():
    found = chunks(error(retryable=True), RETRY)
    assert types(found) == ["data-deuz-error", "data-deuz-retry"]
    assert found[1]["data"]["attempt"] == 1


def test_a_retryable_error_no_retry_follows_is_an_error_at_the_end():
    stream = state()
    assert chunks(error(retryable=True), stream=stream) == []
    assert types(ui_chunks_end(stream)) == ["error", "finish"]


def test_a_recovery_is_a_deuz_data_chunk_after_the_end_of_the_cut_text():
    found = chunks(delta("Half"), {"type": "recovery", "restarted_step_index": 1, "message": "Restarted."})
    assert found[2:] == [{"type": "text-end", "id": "text-0"},
                         {"type": "data-deuz-recovery", "data": {"restarted_step_index": 1, "message": "Restarted."}}]


def test_a_cancel_denies_the_requests_it_withdrew_and_no_answered_one():
    found = chunks(call(), request(), call("c2"), request(approval_id="a2", tool_call_id="c2"),
                   verdict_part(approved=True), result(), finish("suspended"),
                   {"type": "cancelled", "by": "olga", "reason": "Wrong."})
    assert found[-2:] == [{"type": "data-deuz-cancelled", "data": {"by": "olga", "reason": "Wrong."}},
                          {"type": "tool-output-denied", "toolCallId": "c2"}]


def test_a_cancel_is_a_deuz_data_chunk():
    assert chunks({"type": "cancelled", "by": "olga", "reason": "Wrong."}) == [
        {"type": "data-deuz-cancelled", "data": {"by": "olga", "reason": "Wrong."}}]


def test_a_part_type_the_mapping_does_not_know_is_a_deuz_data_chunk():
    assert chunks({"type": "checkpoint-saved", "step_index": 2}) == [
        {"type": "data-deuz-checkpoint-saved", "data": {"step_index": 2}}]


# A sub-agent's parts


def test_a_sub_agents_tool_call_is_a_dynamic_tool_part_after_its_agent_path():
    assert chunks(call("s1", "run_shell", agent_path=SUB)) == [
        {"type": "data-deuz-sub-agent", "data": {"tool_call_id": "s1", "agent_path": SUB}},
        {"type": "tool-input-available", "toolCallId": "s1", "toolName": "run_shell", "input": {"amount": 1},
         "dynamic": True},
    ]


def test_a_sub_agents_tool_result_is_dynamic():
    assert chunks(result("s1", output=0, agent_path=SUB)) == [
        {"type": "tool-output-available", "toolCallId": "s1", "output": 0, "dynamic": True}]


def test_a_sub_agents_approval_request_says_its_agent_path():
    assert chunks(request(agent_path=SUB))[1]["data"]["agent_path"] == SUB


def test_a_sub_agents_text_is_transient_deltas_then_its_whole_text_once_done():
    found = chunks(delta("Run", agent_path=SUB), delta("ning.", agent_path=SUB), call("s1", "run_shell", agent_path=SUB))
    assert found[:3] == [
        {"type": "data-deuz-text-delta", "data": {"text": "Run", "agent_path": SUB}, "transient": True},
        {"type": "data-deuz-text-delta", "data": {"text": "ning.", "agent_path": SUB}, "transient": True},
        {"type": "data-deuz-text", "data": {"agent_path": SUB, "text": "Running."}},
    ]


def test_a_sub_agents_steps_are_transient_data_not_the_messages_steps():
    found = chunks({"type": "step-start", "step_index": 0, "agent_path": SUB})
    assert found == [{"type": "data-deuz-step-start", "data": {"step_index": 0, "agent_path": SUB}, "transient": True}]


def test_a_sub_agents_error_and_finish_are_not_the_messages():
    found = chunks(error(retryable=False) | {"agent_path": SUB}, finish("stop") | {"agent_path": SUB})
    assert types(found) == ["data-deuz-error", "data-deuz-finish"]


# The SSE bytes of a follower's frames


class FakeFollow:
    """A Follow's interface (runs.wire.followers.Follow) over fixed frames."""

    def __init__(self, *frames: Frame) -> None:
        self.run_id = "r-42"
        self.cursor = -1
        self.given = list(frames)
        self.is_closed = False

    async def frames(self):
        for frame in self.given:
            yield frame

    def close(self) -> None:
        self.is_closed = True


def body_of(follow: FakeFollow) -> str:
    async def read():
        return "".join([piece async for piece in ui_message_events(follow, approvals_decided_by="reviewers")])

    return async_to_sync(read)()


def part_frame(seq: int, part: dict) -> Frame:
    return Frame(FrameKind.PART, seq=seq, part=part)


def test_the_stream_is_one_data_line_per_chunk_ending_with_done():
    body = body_of(FakeFollow(part_frame(0, {"type": "start", "run_id": "r-42"}), part_frame(1, delta("Hi")),
                              part_frame(2, finish("stop")), Frame(FrameKind.DONE)))
    assert body == "".join(f"data: {line}\n\n" for line in [
        '{"type":"start","messageId":"r-42"}', '{"type":"text-start","id":"text-1"}',
        '{"type":"text-delta","id":"text-1","delta":"Hi"}', '{"type":"text-end","id":"text-1"}',
        '{"type":"finish","finishReason":"stop"}', "[DONE]"])


def test_a_stream_from_a_cursor_starts_the_message_before_its_first_part():
    body = body_of(FakeFollow(part_frame(8, verdict_part(approved=True)), Frame(FrameKind.DONE)))
    assert body.startswith('data: {"type":"start","messageId":"r-42"}\n\ndata: {"type":"data-deuz-tool-approval')


def test_an_idle_stream_sends_a_keep_alive_comment_every_fifteen_seconds():
    body = body_of(FakeFollow(*[Frame(FrameKind.IDLE)] * 15, Frame(FrameKind.DONE)))
    assert body.count(": keep-alive\n\n") == 1


def test_a_failed_follow_ends_the_stream_with_an_error_and_done():
    failed = Frame(FrameKind.FAILED, part=error(retryable=True), is_final=False)
    body = body_of(FakeFollow(part_frame(0, delta("Hi")), failed))
    assert body.endswith('data: {"type":"text-end","id":"text-0"}\n\n'
                         'data: {"type":"error","errorText":"RateLimitError: Slow down."}\n\n'
                         'data: {"type":"finish","finishReason":"error"}\n\ndata: [DONE]\n\n')


def test_the_response_has_the_ui_message_stream_header():
    response = UIMessageStreamResponse(FakeFollow(), approvals_decided_by="reviewers")
    assert (response["x-vercel-ai-ui-message-stream"], response["Content-Type"]) == ("v1", "text/event-stream")


def test_closing_the_response_closes_the_follow():
    follow = FakeFollow()
    UIMessageStreamResponse(follow, approvals_decided_by="reviewers").close()
    assert follow.is_closed
