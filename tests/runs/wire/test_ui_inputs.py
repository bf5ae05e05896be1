"""What runs.wire.ui_messages reads from the UIMessages a chat client sends: a user message's text and files, an
assistant message's answered approvals."""

from __future__ import annotations

import pytest

from runs.wire.ui_messages import ui_approval_responses, ui_user_content, ui_user_message


def user(*parts: dict) -> dict:
    return {"id": "m1", "role": "user", "parts": list(parts)}


def test_one_text_is_a_string_and_other_parts_are_not_read():
    assert ui_user_content(user({"type": "step-start"}, {"type": "text", "text": "Hi", "state": "done"})) == "Hi"


def test_an_image_data_url_is_an_image_part_with_its_bytes():
    content = ui_user_content(user({"type": "text", "text": "See"},
                                   {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,iVBO"}))
    assert content == [{"type": "text", "text": "See"},
                       {"type": "image", "data": b"\x89PN", "media_type": "image/png"}]


def test_a_file_round_trips_through_the_user_message():
    content = ui_user_content(user({"type": "file", "mediaType": "text/plain", "url": "data:text/plain;base64,aGk=",
                                    "filename": "a.txt"}))
    assert ui_user_message(content, message_id="r:user")["parts"] == [
        {"type": "file", "mediaType": "text/plain", "url": "data:text/plain;base64,aGk=", "filename": "a.txt"}]


@pytest.mark.parametrize("part", [{"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,%%%"},
                                  {"type": "file", "url": "data:text/plain;base64,aGk="},
                                  {"type": "text", "text": 5}])
def test_a_malformed_part_is_a_value_error(part):
    with pytest.raises(ValueError):
        ui_user_content(user(part))


def test_the_answered_approvals_are_read_with_their_reasons():
    message = {"role": "assistant", "parts": [
        {"type": "tool-pay", "state": "approval-responded", "approval": {"id": "a1", "approved": False, "reason": "No"}},
        {"type": "tool-look", "state": "output-available", "approval": {"id": "a0", "approved": True}},
        {"type": "dynamic-tool", "state": "approval-responded", "approval": {"id": "a2", "approved": True}},
    ]}
    assert ui_approval_responses(message) == [{"approval_id": "a1", "approved": False, "reason": "No"},
                                              {"approval_id": "a2", "approved": True, "reason": ""}]


@pytest.mark.parametrize("approval", [{"id": "a1"}, {"id": "a1", "approved": "yes"}, {"approved": True},
                                      {"id": "a1", "approved": True, "reason": 3}])
def test_a_malformed_answer_is_a_value_error(approval):
    with pytest.raises(ValueError):
        ui_approval_responses({"role": "assistant", "parts": [{"type": "tool-pay", "state": "approval-responded",
                                                               "approval": approval}]})
