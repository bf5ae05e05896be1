"""Recorded streaming responses, byte for byte as the APIs send them (Server-Sent Events).

Anthropic Messages: ``event:`` + ``data:`` pairs, message_start / content_block_start / content_block_delta
(text_delta, input_json_delta) / content_block_stop / message_delta (stop_reason, cumulative usage) /
message_stop, with ``ping`` events mixed in. OpenAI Chat Completions: ``data:`` chunks of
``chat.completion.chunk``, tool call deltas keyed by ``index``, a last usage-only chunk with empty
``choices`` (``stream_options={"include_usage": true}``), then ``data: [DONE]``.
"""

from __future__ import annotations

# ----------------------------------------------------------------- Anthropic

ANTHROPIC_TEXT = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"! How can I"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" help you today?"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}

event: message_stop
data: {"type":"message_stop"}

"""

# One text block, then two tool_use blocks whose input arrives in several input_json_delta pieces.
ANTHROPIC_TOOL_USE = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"I'll check the weather in Paris"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" and the time in Tokyo."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": \\"Par"}}

event: ping
data: {"type": "ping"}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"is\\", \\"unit\\""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":": \\"celsius\\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01VqG2jCdyjoB9HMTFnCKeo2","name":"get_time","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\\"timezone\\":"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":" \\"Asia/Tokyo\\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":89}}

event: message_stop
data: {"type":"message_stop"}

"""

# A tool that takes no arguments: the API streams one empty input_json_delta.
ANTHROPIC_TOOL_USE_NO_INPUT = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_01Aq9w938a90dw8q","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":310,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01NRLabsLyVHZPKxbKvkfSMn","name":"get_time","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":30}}

event: message_stop
data: {"type":"message_stop"}

"""

# The final answer after the tool results of ANTHROPIC_TOOL_USE.
ANTHROPIC_FINAL = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_01Cw9mPDwUN1vbUGrsBkPNBR","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":603,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It is 18\u00b0C in Paris"}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" and 21:05 in Tokyo."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":21}}

event: message_stop
data: {"type":"message_stop"}

"""

# An error event in the middle of a 200 stream (the API overloaded after it started answering).
ANTHROPIC_OVERLOADED_MID_STREAM = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_01Fi1EqjDkLZWb48cXrdMGpM","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

event: error
data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}

"""

ANTHROPIC_401_BODY = {
    "type": "error",
    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
}

ANTHROPIC_500_BODY = {
    "type": "error",
    "error": {"type": "api_error", "message": "Internal server error"},
    "request_id": "req_011CSHoEeqs5C35K2UUqR7Fz",
}

# ------------------------------------------------------------------- OpenAI

OPENAI_TEXT = """\
data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":"! How can I"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":" help you today?"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}

data: [DONE]

"""

# Two parallel tool calls: each id and name arrive first, the arguments in several chunks; usage comes last.
OPENAI_TOOL_CALLS = """\
data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"ci"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\\": \\"Pa"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ris\\", \\"unit\\": \\"celsius\\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_mVbv3BGkNvyj7qL8zWQkvgKR","type":"function","function":{"name":"get_time","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\\"timezone\\""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":": \\"Asia/Tokyo\\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[],"usage":{"prompt_tokens":142,"completion_tokens":52,"total_tokens":194,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}

data: [DONE]

"""

# The final answer after the tool results of OPENAI_TOOL_CALLS.
OPENAI_FINAL = """\
data: {"id":"chatcmpl-B9MHEx2kQ0g7d2W9tY5nXzJq7Lm1A","object":"chat.completion.chunk","created":1741570285,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHEx2kQ0g7d2W9tY5nXzJq7Lm1A","object":"chat.completion.chunk","created":1741570285,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":"It is 18\u00b0C in Paris"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHEx2kQ0g7d2W9tY5nXzJq7Lm1A","object":"chat.completion.chunk","created":1741570285,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":" and 21:05 in Tokyo."},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-B9MHEx2kQ0g7d2W9tY5nXzJq7Lm1A","object":"chat.completion.chunk","created":1741570285,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-B9MHEx2kQ0g7d2W9tY5nXzJq7Lm1A","object":"chat.completion.chunk","created":1741570285,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[],"usage":{"prompt_tokens":231,"completion_tokens":14,"total_tokens":245,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}

data: [DONE]

"""

OPENAI_401_BODY = {
    "error": {
        "message": "Incorrect API key provided: sk-proj-********************************wxyz. You can find your API "
        "key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}

OPENAI_500_BODY = {
    "error": {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}

# ============================================================ stop reasons, cut-offs, caching, errors
#
# The same wire shapes as above, for the cases the runtime must survive. Anthropic reports cached prompt
# tokens apart from input_tokens (cache_read_input_tokens, cache_creation_input_tokens); its stop_reason is
# max_tokens when the output limit cut the answer, refusal when the model declined.

# A prompt mostly read from the cache (1800 tokens), partly written to it (200), 25 fresh.
ANTHROPIC_CACHED_TEXT = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_01Q3cX1nDq8s3VJX2yHw9ZTe","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":200,"cache_read_input_tokens":1800,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Cached hello."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":25,"cache_creation_input_tokens":200,"cache_read_input_tokens":1800,"output_tokens":12}}

event: message_stop
data: {"type":"message_stop"}

"""

ANTHROPIC_MAX_TOKENS_TEXT = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_01MaxTok7xGq2LzP9aV3nK4s","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":31,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Once upon a time, in a land"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":16}}

event: message_stop
data: {"type":"message_stop"}

"""

ANTHROPIC_REFUSAL = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_01Refu5aLq2LzP9aV3nK4sXy","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":40,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"I can't help with that."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null},"usage":{"output_tokens":8}}

event: message_stop
data: {"type":"message_stop"}

"""

# The output limit falls inside a tool_use block's input: the block still closes, then stop_reason max_tokens.
ANTHROPIC_TOOL_USE_CUT_OFF = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_01CutOff3wDgGV9EUtLvnow3","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":2,"service_tier":"standard"}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01CutOffxJ34qAmk2tNTrN7U","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": \\"Par"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":16}}

event: message_stop
data: {"type":"message_stop"}

"""

# What a small model behind an Anthropic-compatible server sends: a trailing comma, so not JSON.
ANTHROPIC_TOOL_USE_MALFORMED = """\
event: message_start
data: {"type":"message_start","message":{"id":"msg_01Malformed9EUtLvnow3U2","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01MalformedqAmk2tNTrN7Up","name":"get_weather","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": \\"Paris\\",}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}

event: message_stop
data: {"type":"message_stop"}

"""

ANTHROPIC_429_BODY = {
    "type": "error",
    "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"},
    "request_id": "req_011CSHoEeqs5C35K2UUqR7G0",
}

ANTHROPIC_529_BODY = {
    "type": "error",
    "error": {"type": "overloaded_error", "message": "Overloaded"},
    "request_id": "req_011CSHoEeqs5C35K2UUqR7G1",
}

ANTHROPIC_400_BODY = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "messages: text content blocks must be non-empty"},
    "request_id": "req_011CSHoEeqs5C35K2UUqR7G2",
}

# ------------------------------------------------------------------- OpenAI and compatible servers

OPENAI_LENGTH_TEXT = """\
data: {"id":"chatcmpl-BLen9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":"Once upon a time, in a land"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BLen9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}],"usage":null}

data: {"id":"chatcmpl-BLen9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":16,"total_tokens":47,"prompt_tokens_details":{"cached_tokens":0}}}

data: [DONE]

"""

OPENAI_CONTENT_FILTER = """\
data: {"id":"chatcmpl-BFil9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":"I"},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BFil9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"content_filter"}],"usage":null}

data: {"id":"chatcmpl-BFil9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":1,"total_tokens":41}}

data: [DONE]

"""

# The output limit falls inside the arguments of a tool call.
OPENAI_TOOL_CALL_CUT_OFF = """\
data: {"id":"chatcmpl-BCut9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_CutOff9pD3xa9XTPNJ32zg2h","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BCut9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\": \\"Pa"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BCut9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}],"usage":null}

data: {"id":"chatcmpl-BCut9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":142,"completion_tokens":16,"total_tokens":158}}

data: [DONE]

"""

# A small local model's Python-ish arguments (single quotes): not JSON.
OPENAI_TOOL_CALL_MALFORMED = """\
data: {"id":"chatcmpl-BMal9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741570283,"model":"qwen2.5:7b","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_Malformed3xa9XTPNJ32zg2","type":"function","function":{"name":"get_weather","arguments":"{'city': 'Paris'}"}}]},"logprobs":null,"finish_reason":null}]}

data: {"id":"chatcmpl-BMal9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741570283,"model":"qwen2.5:7b","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}

data: [DONE]

"""

# Ollama's /v1 endpoint: each parallel call arrives whole in its own chunk, every one at index 0, and the
# stream ends with finish_reason "stop" and no usage chunk.
OLLAMA_PARALLEL_SAME_INDEX = """\
data: {"id":"chatcmpl-529","object":"chat.completion.chunk","created":1741570283,"model":"llama3.1:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_w1k3xq9d","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-529","object":"chat.completion.chunk","created":1741570283,"model":"llama3.1:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_t7m2vz4p","index":0,"type":"function","function":{"name":"get_time","arguments":"{\\"timezone\\":\\"Asia/Tokyo\\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-529","object":"chat.completion.chunk","created":1741570283,"model":"llama3.1:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}

data: [DONE]

"""

# A server that omits the index of tool call deltas: the id and name open a call, argument pieces continue it.
NO_INDEX_TOOL_CALLS = """\
data: {"id":"chatcmpl-noidx","object":"chat.completion.chunk","created":1741570283,"model":"local-model","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\": "}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-noidx","object":"chat.completion.chunk","created":1741570283,"model":"local-model","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"\\"Paris\\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-noidx","object":"chat.completion.chunk","created":1741570283,"model":"local-model","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\\"timezone\\": \\"Asia/Tokyo\\"}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-noidx","object":"chat.completion.chunk","created":1741570283,"model":"local-model","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

"""

# A text answer with no usage chunk at all (a server that ignores or was not sent stream_options).
NO_USAGE_TEXT = """\
data: {"id":"chatcmpl-nouse","object":"chat.completion.chunk","created":1741569952,"model":"local-model","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello from a local server."},"finish_reason":null}]}

data: {"id":"chatcmpl-nouse","object":"chat.completion.chunk","created":1741569952,"model":"local-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

"""

# 1536 of 2048 prompt tokens read from OpenAI's automatic prompt cache.
OPENAI_CACHED_TEXT = """\
data: {"id":"chatcmpl-BCac9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":"Cached hello."},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-BCac9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-BCac9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":2048,"completion_tokens":10,"total_tokens":2058,"prompt_tokens_details":{"cached_tokens":1536,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}

data: [DONE]

"""

# vLLM reports a failure after the stream started as an error object in a data line.
OPENAI_ERROR_MID_STREAM = """\
data: {"id":"chatcmpl-BErr9s8CjcvOU2jLn4n570S5q","object":"chat.completion.chunk","created":1741569952,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"logprobs":null,"finish_reason":null}]}

data: {"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":500}}

"""

OPENAI_429_BODY = {
    "error": {
        "message": "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 30000.",
        "type": "tokens",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}

OPENAI_400_BODY = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
