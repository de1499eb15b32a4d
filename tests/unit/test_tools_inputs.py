"""Argument validation, schemas and descriptions of the lock tools (pure logic)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockyard.infra.tools.tool_inputs import (
    ACQUIRE_SCHEMA,
    ACQUIRE_TOOL,
    MAX_FILES_PER_CALL,
    MAX_TIMEOUT_SECONDS,
    RELEASE_SCHEMA,
    RELEASE_TOOL,
    TOOL_NAMES,
    TOOL_SPECS,
    AcquireInput,
    InvalidToolInputError,
    ReleaseInput,
    parse_arguments,
)


def _acquire_error(arguments: object) -> str:
    with pytest.raises(InvalidToolInputError) as caught:
        parse_arguments(ACQUIRE_TOOL, AcquireInput, arguments)
    return str(caught.value)


def _release_error(arguments: object) -> str:
    with pytest.raises(InvalidToolInputError) as caught:
        parse_arguments(RELEASE_TOOL, ReleaseInput, arguments)
    return str(caught.value)


def test_acquire_defaults_to_a_thirty_second_wait() -> None:
    parsed = parse_arguments(ACQUIRE_TOOL, AcquireInput, {"filepaths": ["a.py"]})
    assert parsed.filepaths == ["a.py"]
    assert parsed.timeout_seconds == 30


@pytest.mark.parametrize("timeout", [0, 0.5, 7, MAX_TIMEOUT_SECONDS])
def test_acquire_accepts_timeouts_in_range(timeout: float) -> None:
    parsed = parse_arguments(
        ACQUIRE_TOOL, AcquireInput, {"filepaths": ["a"], "timeout_seconds": timeout}
    )
    assert parsed.timeout_seconds == timeout


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, '"filepaths" is missing'),
        (None, '"filepaths" is missing'),
        ({"filepaths": []}, '"filepaths" is empty'),
        ({"filepaths": "a.py"}, '"filepaths" must be a list'),
        ({"filepaths": ["a.py", 3]}, '"filepaths" must be a list'),
        ({"filepaths": [""]}, '"filepaths" must be a list'),
        ({"filepaths": ["   "]}, "non-blank"),
        ({"filepaths": ["a\x00b"]}, '"filepaths" must be a list'),
        ({"filepaths": ["a"] * (MAX_FILES_PER_CALL + 1)}, "more than 256 files"),
        ({"filepaths": ["a"], "timeout_seconds": -1}, '"timeout_seconds" must be a number'),
        ({"filepaths": ["a"], "timeout_seconds": 3601}, "from 0 to 3600"),
        ({"filepaths": ["a"], "timeout_seconds": "5"}, '"timeout_seconds" must be a number'),
        ({"filepaths": ["a"], "timeout_seconds": True}, '"timeout_seconds" must be a number'),
        ({"filepaths": ["a"], "timeout_seconds": float("nan")}, '"timeout_seconds"'),
        ({"filepaths": ["a"], "timeout_seconds": float("inf")}, '"timeout_seconds"'),
        ({"filepaths": ["a"], "files": ["b"]}, 'unknown argument "files"'),
        (["a.py"], "must be a JSON object"),
    ],
)
def test_acquire_rejects_bad_arguments_with_a_next_step(arguments: object, expected: str) -> None:
    text = _acquire_error(arguments)
    assert expected in text
    assert text.startswith("lock_acquire rejected its arguments: ")
    assert "Nothing was locked." in text
    assert 'Call it again like {"filepaths": [' in text


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, 'give either "filepaths"'),
        ({"all": False}, 'give either "filepaths"'),
        ({"all": True, "filepaths": ["a"]}, "not both"),
        ({"all": "yes"}, '"all" must be true or false'),
        ({"all": 1}, '"all" must be true or false'),
        ({"filepaths": []}, '"filepaths" is empty'),
        ({"filepaths": [7]}, '"filepaths" must be a list'),
        ({"all": True, "filepaths": None}, '"filepaths" must be a list'),
        ({"filepaths": ["a"], "force": True}, 'unknown argument "force"'),
        ("all", "must be a JSON object"),
    ],
)
def test_release_rejects_bad_arguments_with_a_next_step(arguments: object, expected: str) -> None:
    text = _release_error(arguments)
    assert expected in text
    assert "Nothing was released." in text
    assert '{"all": true}' in text


def test_release_takes_either_files_or_all() -> None:
    by_files = parse_arguments(RELEASE_TOOL, ReleaseInput, {"filepaths": ["a"], "all": False})
    assert (by_files.filepaths, by_files.all) == (["a"], False)
    everything = parse_arguments(RELEASE_TOOL, ReleaseInput, {"all": True})
    assert (everything.filepaths, everything.all) == (None, True)


def test_several_problems_are_all_named_once() -> None:
    text = _acquire_error({"filepaths": [1, 2], "timeout_seconds": -3, "x": 1})
    assert text.count('"filepaths" must be a list') == 1
    assert '"timeout_seconds" must be' in text
    assert 'unknown argument "x"' in text


def _schema_accepts(schema: dict[str, Any], arguments: dict[str, Any]) -> bool:
    import jsonschema

    try:
        jsonschema.validate(arguments, schema)
    except jsonschema.ValidationError:
        return False
    return True


@pytest.mark.parametrize("spec", TOOL_SPECS, ids=lambda spec: spec.name)
def test_schemas_are_in_the_form_the_sdk_and_cli_forward(spec: Any) -> None:
    schema = spec.input_schema
    assert isinstance(schema["type"], str)
    assert "properties" in schema
    assert not {"oneOf", "anyOf", "allOf"} & set(schema)
    assert schema["additionalProperties"] is False
    for prop in schema["properties"].values():
        assert prop["description"]
    assert len(spec.description) < 1000


def test_tool_names_are_safe_for_mcp_prefixes() -> None:
    assert TOOL_NAMES == ("lock_acquire", "lock_release", "lock_status")


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["filepaths", "timeout_seconds", "other"]),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-5, 5000),
            st.floats(allow_nan=True),
            st.text(max_size=3),
            st.lists(st.one_of(st.text(max_size=4), st.integers()), max_size=4),
        ),
    )
)
def test_acquire_model_and_schema_agree(arguments: dict[str, Any]) -> None:
    """Whatever the model passes, our validation never accepts what the schema forbids.

    (Our rules are a little stricter: blank paths and NaN are refused too.)
    """
    try:
        parse_arguments(ACQUIRE_TOOL, AcquireInput, arguments)
    except InvalidToolInputError:
        return
    assert _schema_accepts(ACQUIRE_SCHEMA, arguments)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["filepaths", "all", "other"]),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.lists(st.text(max_size=4), max_size=3),
        ),
    )
)
def test_release_model_and_schema_agree(arguments: dict[str, Any]) -> None:
    try:
        parse_arguments(RELEASE_TOOL, ReleaseInput, arguments)
    except InvalidToolInputError:
        return
    assert _schema_accepts(RELEASE_SCHEMA, arguments)
