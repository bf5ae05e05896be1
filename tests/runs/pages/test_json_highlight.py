"""The pages' JSON: pretty-printed, syntax-coloured, wrapping, and never a way to inject markup."""

from __future__ import annotations

import json
import re
from html import unescape

from runs.pages.tags import agent_path, json_compact, json_highlight


def test_each_token_is_classed_by_its_kind():
    html = json_highlight({"amount": 84.2, "ok": True, "none": None, "name": "Ada"})
    assert '<span class="json-key">&quot;amount&quot;</span>: <span class="json-number">84.2</span>' in html
    assert '<span class="json-literal">true</span>' in html and '<span class="json-literal">null</span>' in html
    assert '<span class="json-string">&quot;Ada&quot;</span>' in html


def test_the_text_without_markup_is_the_indented_json():
    value = {"b": [1, -2.5e-3, "x, y"], "a": {"nested": "quote \" and \\ backslash"}}
    text = unescape(re.sub(r"<[^>]+>", "", json_highlight(value)))
    assert json.loads(text) == value
    assert text == json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def test_hostile_strings_are_escaped():
    html = json_highlight({"</pre><script>alert(1)</script>": "<img src=x onerror=alert(1)>"})
    assert "<script>" not in html and "<img" not in html
    assert "&lt;/pre&gt;&lt;script&gt;" in html


def test_compact_json_is_one_line_cut_to_its_limit():
    assert json_compact({"b": 2, "a": "x"}) == '{"a": "x", "b": 2}'
    assert json_compact({"text": "y" * 50}, 20) == '{"text": "yyyyyyyyy…'
    assert len(json_compact({"text": "y" * 50}, 20)) == 20


def test_an_agent_path_reads_as_people_say_it():
    assert agent_path(["coder", "tester"]) == "coder › tester"
    assert agent_path([]) == "(the run's agent)"
