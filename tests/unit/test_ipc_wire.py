"""The IPC wire format: what the host accepts and writes matches the published JSON schemas."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockyard.infra.transports.ipc.ratelimit import TokenBucket
from lockyard.infra.transports.ipc.wire import (
    REQUEST_SCHEMA,
    RESPONSE_SCHEMA,
    Request,
    WireError,
    encode_check,
    encode_refusal,
    encode_request,
    encode_result,
    encode_tools,
    new_request_id,
    parse_request,
    request_file_name,
    request_id_of,
)


def valid(schema: dict[str, Any], body: bytes) -> bool:
    import json

    try:
        jsonschema.validate(json.loads(body), schema)
    except jsonschema.ValidationError:
        return False
    return True


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    tool=st.text(min_size=1, max_size=64),
    arguments=st.dictionaries(st.text(max_size=10), json_values, max_size=4),
)
def test_every_encoded_call_is_schema_valid_and_parses_back(
    tool: str, arguments: dict[str, Any]
) -> None:
    request = Request(new_request_id(), "call", tool, arguments)
    raw = encode_request(request)
    assert valid(REQUEST_SCHEMA, raw)
    assert parse_request(raw, request.id) == request


def test_list_tools_and_every_response_kind_match_the_schemas() -> None:
    request = Request(new_request_id(), "list_tools")
    assert valid(REQUEST_SCHEMA, encode_request(request))
    assert parse_request(encode_request(request), request.id) == request
    assert valid(RESPONSE_SCHEMA, encode_result(request.id, "{}", False))
    assert valid(
        RESPONSE_SCHEMA,
        encode_tools(request.id, [{"name": "a", "description": "b", "input_schema": {}}]),
    )
    refusal = WireError("rate_limited", "slow down", retry_after=0.25)
    assert valid(RESPONSE_SCHEMA, encode_refusal(request.id, refusal))


@given(st.binary(max_size=200))
def test_any_bytes_parse_or_are_refused_with_a_code(raw: bytes) -> None:
    with pytest.raises(WireError) as refused:  # random bytes never name the file's id
        parse_request(raw, "abcdefgh")
    assert refused.value.code in ("bad_request", "unsupported_version")
    assert str(refused.value)


def test_request_ids_come_only_from_well_formed_file_names() -> None:
    request_id = new_request_id()
    assert request_id_of(request_file_name(request_id)) == request_id
    assert len({new_request_id() for _ in range(1000)}) == 1000
    for name in (
        "short.json",
        "a b c d e f.json",
        "../../etc.json",
        "abcdefgh.txt",
        ".abcdefgh.json",
    ):
        assert request_id_of(name) is None


def test_a_bool_is_not_version_1() -> None:
    with pytest.raises(WireError) as refused:
        parse_request(b'{"version": true, "id": "abcdefgh", "kind": "list_tools"}', "abcdefgh")
    assert refused.value.code == "unsupported_version"


def test_the_token_bucket_allows_a_burst_then_the_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(rate=2.0, burst=3, clock=lambda: now[0])
    assert [bucket.take() for _ in range(3)] == [None, None, None]
    assert bucket.take() == pytest.approx(0.5)
    now[0] += 0.5
    assert bucket.take() is None
    now[0] += 100
    assert [bucket.take() is None for _ in range(4)] == [True, True, True, False]
    with pytest.raises(ValueError, match="rate"):
        TokenBucket(rate=0, burst=1)


def test_the_schemas_in_the_docs_are_the_codes() -> None:
    import json
    import re
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "sandboxes.md").read_text()
    blocks = {
        title: json.loads(body)
        for title, body in re.findall(r"(Request|Response) schema:\n\n```json\n(.*?)```", doc, re.S)
    }
    assert blocks == {"Request": REQUEST_SCHEMA, "Response": RESPONSE_SCHEMA}


def test_a_cancel_names_its_target_and_nothing_else() -> None:
    cancel = Request(new_request_id(), "cancel", target=new_request_id())
    raw = encode_request(cancel)
    assert valid(REQUEST_SCHEMA, raw)
    assert parse_request(raw, cancel.id) == cancel
    for body, says in (
        (b'{"version":1,"id":"abcdefgh","kind":"cancel"}', '"target"'),
        (b'{"version":1,"id":"abcdefgh","kind":"cancel","target":"../x"}', '"target"'),
        (
            b'{"version":1,"id":"abcdefgh","kind":"cancel","target":"abcdefgh","tool":"x"}',
            "takes no",
        ),
        (b'{"version":1,"id":"abcdefgh","kind":"list_tools","target":"abcdefgh"}', '"target"'),
        (b'{"version":1,"id":"abcdefgh","kind":"call","tool":"x","target":"abcdefgh"}', '"target"'),
    ):
        with pytest.raises(WireError, match=says):
            parse_request(body, "abcdefgh")


@given(paths=st.lists(st.text(min_size=1, max_size=40), max_size=5))
def test_a_check_names_files_only_and_its_answer_matches_the_schema(paths: list[str]) -> None:
    check = Request(new_request_id(), "check", arguments={"filepaths": paths})
    raw = encode_request(check)
    assert valid(REQUEST_SCHEMA, raw)
    assert parse_request(raw, check.id) == check
    locks = [{"path": p, "filepath": p, "holder": None, "lost": None} for p in paths]
    assert valid(RESPONSE_SCHEMA, encode_check(check.id, "alice", locks))


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "check"},
        {"kind": "check", "arguments": {"filepaths": "a.py"}},
        {"kind": "check", "arguments": {"filepaths": [""]}},
        {"kind": "check", "arguments": {"filepaths": [1]}},
        {"kind": "check", "arguments": {"filepaths": ["a.py"], "agent": "bob"}},
        {"kind": "check", "arguments": {"filepaths": ["a.py"] * 257}},
        {"kind": "check", "tool": "x", "arguments": {"filepaths": []}},
    ],
)
def test_a_bad_check_is_refused_with_what_to_send(body: dict[str, Any]) -> None:
    import json

    request_id = new_request_id()
    raw = json.dumps({"version": 1, "id": request_id, **body}).encode()
    with pytest.raises(WireError) as refused:
        parse_request(raw, request_id)
    assert refused.value.code == "bad_request"
    assert "check" in str(refused.value)


@given(
    guard=st.sampled_from(["write", "shell", "commit"]),
    paths=st.lists(st.text(min_size=1, max_size=40), max_size=5),
    reason=st.text(min_size=1, max_size=200),
)
def test_a_denied_report_round_trips_and_matches_the_schema(
    guard: str, paths: list[str], reason: str
) -> None:
    arguments = {"guard": guard, "filepaths": paths, "reason": reason}
    denied = Request(new_request_id(), "denied", arguments=arguments)
    raw = encode_request(denied)
    assert valid(REQUEST_SCHEMA, raw)
    assert parse_request(raw, denied.id) == denied


@pytest.mark.parametrize(
    "arguments",
    [
        {"guard": "write", "filepaths": ["a.py"]},
        {"guard": "read", "filepaths": ["a.py"], "reason": "no"},
        {"guard": "write", "filepaths": ["a.py"], "reason": ""},
        {"guard": "write", "filepaths": ["a.py"], "reason": "x" * 4001},
        {"guard": "write", "filepaths": [""], "reason": "no"},
        {"guard": "write", "filepaths": ["a.py"], "reason": "no", "agent": "bob"},
    ],
)
def test_a_bad_denied_report_is_refused_with_what_to_send(arguments: dict[str, Any]) -> None:
    import json

    request_id = new_request_id()
    body = {"version": 1, "id": request_id, "kind": "denied", "arguments": arguments}
    with pytest.raises(WireError) as refused:
        parse_request(json.dumps(body).encode(), request_id)
    assert refused.value.code == "bad_request"
    assert '"denied" request takes' in str(refused.value)
