import os

import pytest
from hypothesis import settings

# CI replays the same examples on every run, so a red CI is reproducible from its log;
# a developer's runs keep exploring new examples.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
