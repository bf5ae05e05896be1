"""Anthropic streams for the demo reimbursement agent, in the shape the API sends them (Server-Sent Events):
the model looks expense exp-1042 up, then answers from the tool's result."""

from __future__ import annotations

LOOKUP = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_01RtLk7pQe3Vb9Nx2Hs4Wd6A","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":512,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look up expense exp-1042 first."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01Lk2Qm8Rt5Vx9Zb3Nc7Hd4F","name":"lookup_expense","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"expense_id\\": "}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\\"exp-1042\\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":58}}

event: message_stop
data: {"type":"message_stop"}

"""

ANSWER = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_01Hw4Nc8Xe2Rt6Yu1Io5Pa9S","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":640,"cache_creation_input_tokens":0,"cache_read_input_tokens":512,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Expense exp-1042 is already"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" in the books; nothing to pay."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":14}}

event: message_stop
data: {"type":"message_stop"}

"""

RATE_LIMITED_BODY = {
    "type": "error",
    "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"},
    "request_id": "req_011CSHoEeqs5C35K2UUqR7G0",
}

OVERLOADED_BODY = {
    "type": "error",
    "error": {"type": "overloaded_error", "message": "Overloaded"},
    "request_id": "req_011CSHoEeqs5C35K2UUqR7G1",
}

UNAUTHORIZED_BODY = {
    "type": "error",
    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    "request_id": "req_011CSHoEeqs5C35K2UUqR7G2",
}
