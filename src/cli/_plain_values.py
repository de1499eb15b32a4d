"""Option values of plain types (text, whole numbers, a path through a parser, lists of
those) converted without pydantic.

typer (0.2x) converts every parameter through a pydantic `TypeAdapter`, built when the
command runs, even for a `str` option left out: loading pydantic and building the adapters
costs ~0.7 s of CPU before any command does its work, more than `lockyard log` needs to
read the last records of a journal of a million. Here each of our parameters gets a
converter that handles the values a command line gives (a string, a default, None) the way
typer's adapter does, and hands anything else to typer's own converter, so odd values get
typer's own checks and messages. On a typer without that machinery nothing is changed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Final, get_args, get_origin

_WHOLE: Final = re.compile(r"-?(?:0|[1-9][0-9]*)")


class _NotPlainError(Exception):
    """A value this module does not convert: typer's converter does."""


def make_plain(params: Iterable[Any]) -> None:
    """Give each parameter of plain type a converter without pydantic (once)."""
    for param in params:
        if getattr(param, "_runtime_param", "absent") is not None:
            continue  # not typer's lazy converter, or already made
        convert = _converter_of(param.type_descriptor)
        if convert is not None:
            param._runtime_param = _PlainValue(convert, param.get_runtime_param)


class _PlainValue:
    """Stands in for typer's RuntimeParam: `coerce(value, param, ctx)`."""

    def __init__(self, convert: Callable[[Any], Any], typers: Callable[[], Any]) -> None:
        self._convert = convert
        self._typers = typers

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multiple = param.multiple or param.nargs == -1
        if value is None:
            return () if multiple else None
        try:
            if multiple:
                if not isinstance(value, (list, tuple)):
                    raise _NotPlainError
                return [self._convert(item) for item in value]
            return self._convert(value)
        except Exception:  # anything unusual: typer's converter, checks and message
            param._runtime_param = None
            typers = self._typers()
            param._runtime_param = self
            return typers.coerce(value, param=param, ctx=ctx)


def _converter_of(descriptor: Any) -> Callable[[Any], Any] | None:
    annotation = descriptor.annotation
    info = descriptor.parameter_info
    if get_origin(annotation) is list:
        (annotation,) = get_args(annotation) or (None,)
    if descriptor.file_annotation is not None:
        return None
    if info.parser is not None:
        return _parsed(info.parser)
    if annotation is str:
        return _text
    if annotation is bool:
        return _flag
    if annotation is int and not getattr(info, "clamp", False):
        return _whole(info.min, info.max)
    return None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise _NotPlainError
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _NotPlainError
    return value


def _parsed(parser: Callable[[str], Any]) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        return parser(_text(value))

    return parse


def _whole(low: int | None, high: int | None) -> Callable[[Any], int]:
    def whole(value: Any) -> int:
        if isinstance(value, str) and _WHOLE.fullmatch(value):
            number = int(value)
        elif type(value) is int:
            number = value
        else:
            raise _NotPlainError
        if (low is not None and number < low) or (high is not None and number > high):
            raise _NotPlainError  # typer says what the bounds are
        return number

    return whole
