"""One wait limit: the lock store and the lock tools accept the same timeouts."""

import pytest

from lockyard.infra.lockstore import MAX_TIMEOUT_SECONDS, InvalidTimeoutError
from lockyard.infra.lockstore.paths import validate_timeout
from lockyard.infra.tools import tool_inputs
from lockyard.infra.tools.tool_inputs import ACQUIRE_SCHEMA, AcquireInput


def test_the_store_and_the_tools_share_one_timeout_limit() -> None:
    assert tool_inputs.MAX_TIMEOUT_SECONDS is MAX_TIMEOUT_SECONDS
    assert ACQUIRE_SCHEMA["properties"]["timeout_seconds"]["maximum"] == MAX_TIMEOUT_SECONDS


@pytest.mark.parametrize("seconds", [0, 1.5, MAX_TIMEOUT_SECONDS])
def test_a_timeout_the_tools_accept_the_store_accepts(seconds: float) -> None:
    assert AcquireInput(filepaths=["a.py"], timeout_seconds=seconds).timeout_seconds == seconds
    assert validate_timeout(seconds) == seconds


@pytest.mark.parametrize("seconds", [MAX_TIMEOUT_SECONDS + 0.5, 7200, 86_400])
def test_a_timeout_the_tools_refuse_the_store_refuses(seconds: float) -> None:
    with pytest.raises(ValueError, match="less than or equal"):
        AcquireInput(filepaths=["a.py"], timeout_seconds=seconds)
    with pytest.raises(InvalidTimeoutError, match=f"up to {MAX_TIMEOUT_SECONDS:g} seconds"):
        validate_timeout(seconds)
