"""A bug planted in one decision of the line, to show that the explorer finds it."""

from __future__ import annotations

import ast
import inspect
from typing import Any

from lockyard.infra.lockstore.lockdir import line


def swapped(function: str, first: int) -> Any:
    """`line.<function>` with statements `first` and `first + 1` of its body swapped (its
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
