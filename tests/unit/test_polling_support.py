"""The tests' polling helper: returns the condition's value once true, and on a hang fails
naming what was awaited."""

from __future__ import annotations

import anyio
import pytest

from polling_support import wait_until, wait_until_async


def test_wait_until_returns_the_first_true_value() -> None:
    checks: list[int] = []

    def third_check() -> int:
        checks.append(1)
        return len(checks) if len(checks) >= 3 else 0

    assert wait_until(third_check, "the third check") == 3


def test_a_wait_that_never_ends_names_what_was_awaited_and_the_last_value() -> None:
    with pytest.raises(AssertionError, match=r"waiting for: bob queued \(last checked: \[\]\)"):
        wait_until(list, "bob queued", within=0.02)


def test_without_a_description_the_failure_quotes_the_condition() -> None:
    with pytest.raises(AssertionError, match=r"lambda: 1 \+ 1 == 3"):
        wait_until(lambda: 1 + 1 == 3, within=0.02)


def test_a_description_function_runs_only_when_the_wait_fails() -> None:
    calls: list[str] = []

    def describe() -> str:
        calls.append("described")
        return "state at failure"

    wait_until(lambda: True, describe)
    assert calls == []
    with pytest.raises(AssertionError, match="state at failure"):
        wait_until(lambda: False, describe, within=0.02)
    assert calls == ["described"]


@pytest.mark.anyio
async def test_the_async_wait_lets_other_tasks_run_and_awaits_async_conditions() -> None:
    done: list[str] = []

    async def finish() -> None:
        await anyio.sleep(0.01)
        done.append("done")

    async def finished() -> str | None:
        return done[0] if done else None

    async with anyio.create_task_group() as group:
        group.start_soon(finish)
        assert await wait_until_async(finished, "the task finished") == "done"


@pytest.mark.anyio
async def test_an_async_wait_that_never_ends_names_what_was_awaited() -> None:
    with pytest.raises(AssertionError, match="waiting for: nothing"):
        await wait_until_async(lambda: None, "nothing", within=0.02)
