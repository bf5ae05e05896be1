"""``metadata`` on a run: a JSON object of at most 16 KB, kept, returned as given to the run's readers, and
filterable with ``?metadata.KEY=VALUE``; a start body's unknown keys, ``webhook`` among them, are refused (issue 22)."""

from __future__ import annotations

import pytest

from runs.api.inputs import MAX_METADATA_BYTES, WEBHOOK_IN_START_BODY, metadata_size
from runs.models import Run

pytestmark = pytest.mark.django_db

MESSAGES = [{"role": "user", "content": "Please reimburse exp-1042."}]


def start(client, run_id: str, metadata=None, **extra):
    body = {"agent": "reimbursement", "messages": MESSAGES, "run_id": run_id, **extra}
    if metadata is not None:
        body["metadata"] = metadata
    return client.post("/api/runs/", body, format="json")


def listed(client, query: str) -> list[str]:
    response = client.get(f"/api/runs/?{query}")
    assert response.status_code == 200, response.content
    return [run["run_id"] for run in response.json()["results"]]


# --------------------------------------------------------------------------- kept and returned


def test_metadata_is_returned_as_given_by_the_start_the_detail_and_the_list(api_client):
    metadata = {"customer": "acme", "n": 5, "ratio": 0.5, "tags": ["a", "b"], "nested": {"deep": [None, True]},
                "ünïcode": "日本"}
    assert start(api_client, "r1", metadata).json()["metadata"] == metadata
    assert api_client.get("/api/runs/r1/").json()["metadata"] == metadata
    assert api_client.get("/api/runs/").json()["results"][0]["metadata"] == metadata
    assert Run.objects.get(run_id="r1").metadata == metadata


def test_a_run_started_without_metadata_has_an_empty_object(api_client):
    assert start(api_client, "r1").json()["metadata"] == {}


@pytest.mark.parametrize("metadata", [[], ["a"], "text", 5, True, None], ids=repr)
def test_metadata_that_is_not_an_object_is_a_400_naming_it(api_client, metadata):
    body = {"agent": "reimbursement", "messages": MESSAGES, "run_id": "r1", "metadata": metadata}
    response = api_client.post("/api/runs/", body, format="json")
    assert response.status_code == 400
    assert "metadata" in response.json()
    assert not Run.objects.exists()


def test_metadata_of_exactly_16_kb_is_kept(api_client):
    metadata = {"blob": "x" * (MAX_METADATA_BYTES - len('{"blob":""}'))}
    assert metadata_size(metadata) == MAX_METADATA_BYTES
    assert start(api_client, "r1", metadata).status_code == 201


def test_metadata_over_16_kb_is_a_400_naming_it(api_client):
    metadata = {"blob": "x" * (MAX_METADATA_BYTES - len('{"blob":""}') + 1)}
    response = start(api_client, "r1", metadata)
    assert response.status_code == 400
    assert "16384 bytes" in response.json()["metadata"][0]


def test_metadata_size_counts_utf8_bytes_not_characters(api_client):
    metadata = {"blob": "é" * (MAX_METADATA_BYTES // 2)}  # two bytes each: twice the limit in bytes
    assert start(api_client, "r1", metadata).status_code == 400


def test_metadata_holding_nul_and_the_escape_character_is_returned_as_given(api_client):
    # PostgreSQL's jsonb refuses \u0000: runs.models.NulSafeJSONField stores it escaped, with U+E000.
    metadata = {"k\x00": ["a\x00b", {"\ue000": "\ue0000\ue000\ue000"}], "e": "\ue000"}
    assert start(api_client, "r1", metadata).status_code == 201
    assert api_client.get("/api/runs/r1/").json()["metadata"] == metadata
    assert Run.objects.get(run_id="r1").metadata == metadata


def test_the_metadata_filter_matches_a_value_holding_the_escape_character(api_client):
    start(api_client, "escaped", {"k": "a\ue000b"})
    start(api_client, "plain", {"k": "ab"})
    assert listed(api_client, "metadata.k=a%EE%80%80b") == ["escaped"]


# --------------------------------------------------------------------------- what a start body may hold


def test_a_webhook_in_a_start_body_is_a_400_saying_where_webhooks_are_made(api_client):
    response = start(api_client, "r1", webhook={"url": "http://127.0.0.1:9/hook"})
    assert response.status_code == 400
    assert response.json()["webhook"] == [WEBHOOK_IN_START_BODY]
    assert not Run.objects.exists()


def test_an_unknown_key_in_a_start_body_is_a_400_naming_it(api_client):
    response = start(api_client, "r1", colour="blue")
    assert response.status_code == 400
    assert "'colour'" in response.json()["non_field_errors"][0]
    assert not Run.objects.exists()


# --------------------------------------------------------------------------- the filter


def test_the_metadata_filter_keeps_the_runs_with_that_string_at_that_key(api_client):
    start(api_client, "acme", {"customer": "acme"})
    start(api_client, "globex", {"customer": "globex"})
    start(api_client, "none")
    assert listed(api_client, "metadata.customer=acme") == ["acme"]


def test_the_metadata_filter_matches_strings_only(api_client):
    start(api_client, "text", {"n": "5"})
    start(api_client, "number", {"n": 5})
    start(api_client, "list", {"n": ["5"]})
    assert listed(api_client, "metadata.n=5") == ["text"]


def test_the_metadata_filter_reads_top_level_keys_only(api_client):
    start(api_client, "nested", {"a": {"b": "x"}})
    start(api_client, "dotted", {"a.b": "x"})
    start(api_client, "underscores", {"a__b": "x"})
    assert listed(api_client, "metadata.a.b=x") == ["dotted"]
    assert listed(api_client, "metadata.a__b=x") == ["underscores"]


def test_several_metadata_filters_all_apply_with_the_others(api_client):
    start(api_client, "both", {"customer": "acme", "tier": "gold"})
    start(api_client, "one", {"customer": "acme", "tier": "silver"})
    assert listed(api_client, "metadata.customer=acme&metadata.tier=gold") == ["both"]
    assert listed(api_client, "metadata.customer=acme&status=queued") == ["one", "both"]
    assert listed(api_client, "metadata.customer=acme&status=completed") == []


def test_an_empty_metadata_filter_is_no_filter(api_client):
    start(api_client, "r1", {"customer": "acme"})
    start(api_client, "r2")
    assert listed(api_client, "metadata.customer=") == ["r2", "r1"]


@pytest.mark.parametrize("name", ["metadata.", "metadata.a%20b", "metadata.a%2Fb", "metadata." + "k" * 101])
def test_a_metadata_filter_with_a_key_that_is_not_valid_is_a_400_naming_metadata(api_client, name):
    response = api_client.get(f"/api/runs/?{name}=x")
    assert response.status_code == 400
    assert "metadata.KEY=VALUE" in response.json()["metadata"][0]


# --------------------------------------------------------------------------- who sees it


def test_a_user_who_may_not_read_the_run_sees_neither_it_nor_its_metadata(api_client, outsider_client):
    start(api_client, "r1", {"customer": "acme"})
    assert outsider_client.get("/api/runs/r1/").status_code == 404
    assert listed(outsider_client, "metadata.customer=acme") == []


def test_a_reader_of_every_run_sees_its_metadata_and_finds_it_by_metadata(api_client, reviewer_client):
    start(api_client, "r1", {"customer": "acme"})
    assert reviewer_client.get("/api/runs/r1/").json()["metadata"] == {"customer": "acme"}
    assert listed(reviewer_client, "metadata.customer=acme") == ["r1"]


def test_the_schema_documents_metadata_as_an_object_on_the_start_body_and_the_run(client):
    schemas = client.get("/api/schema/").json()["components"]["schemas"]
    assert schemas["RunStartInput"]["properties"]["metadata"]["type"] == "object"
    assert schemas["RunStartInput"]["additionalProperties"] is False
    assert schemas["Run"]["properties"]["metadata"]["type"] == "object"
