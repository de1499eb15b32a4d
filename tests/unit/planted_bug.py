"""A bug planted in one decision of the line, to show that the explorer finds it."""

from __future__ import annotations

import ast
import inspect
from typing import Any

from lockyard.infra.lockstore.lockdir import line


def swapped(function: str, first: int) -> Any:
    """`line.<function>` with statements `first` and `first + 1` of its body swapped (a
    docstring is statement 0), compiled among line.py's names; monkeypatch it into `line`
    (the recipes look each other up there when they run)."""
    tree = ast.parse(inspect.getsource(getattr(line, function)))
    [definition] = tree.body
    assert isinstance(definition, ast.FunctionDef)
    body = definition.body
    body[first], body[first + 1] = body[first + 1], body[first]
    names = dict(vars(line))
    exec(
        compile(tree, f"<line.{function}, statements {first} and {first + 1} swapped>", "exec"),
        names,
    )
    return names[function]


def every_swap() -> list[tuple[str, int]]:
    """(recipe, first statement) of every swap of two statements in a recipe of line.py: the
    bugs that `swapped` can plant."""
    plants = []
    for function, value in vars(line).items():
        if inspect.isfunction(value) and value.__module__ == line.__name__:
            [definition] = ast.parse(inspect.getsource(value)).body
            assert isinstance(definition, ast.FunctionDef)
            body = definition.body
            documented = ast.get_docstring(definition) is not None
            plants += [(function, first) for first in range(documented, len(body) - 1)]
    return plants


FOUND_AT_TWO_AGENTS = ("release:1", "_withdraw:1", "_hand_over:2", "wait:1")
"""Planted bugs that two agents on one lock with a death, a tick and a timeout find, each
breaking a different invariant: a waiter asleep first in line at a free lock; a staging, an
empty lock, a queue entry left behind. (`scripts/explore_line.py --plants` lists them all.)"""
