"""Code formatters and fixers that rewrite files in place (`ruff format`, `black`, `prettier
--write`...): the source files under their path operands.

Only an invocation that writes counts (`ruff format --check`, `black --diff`, `prettier` without
`--write` write nothing). Directories are walked for the tool's source suffixes, skipping what
the tools skip by default (`.git`, virtual environments, `node_modules`, caches). Every file
they might rewrite is a target, not only those whose formatting will change: that cannot be
known before the tool runs.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .effects import Arg, Effects, Options, read_options
from .utilities import Place, Rule

_SKIPPED_DIRS: Final = frozenset(
    {".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache",
     ".ruff_cache", ".pytest_cache", ".tox", "target", "dist", "build"}
)  # fmt: skip
_MAX_FILES: Final = 10_000
_PYTHON: Final = (".py", ".pyi")
_SCRIPTS: Final = (".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".vue", ".svelte")


@dataclass(frozen=True)
class Formatter:
    name: str
    suffixes: tuple[str, ...] | None
    """Which files under a directory it rewrites (None: every file)."""
    writes: Callable[[Options], bool]
    short_values: str = ""
    long_values: frozenset[str] = frozenset()
    default_here: bool = False
    """With no path operand it formats the current directory."""


def _unless(*flags: str) -> Callable[[Options], bool]:
    return lambda options: not options.has(*flags)


def _only_with(*flags: str) -> Callable[[Options], bool]:
    return lambda options: options.has(*flags)


_RUFF_VALUES: Final = frozenset(
    {"--config", "--line-length", "--target-version", "--select", "--ignore", "--extend-select",
     "--exclude", "--extend-exclude", "--stdin-filename", "--cache-dir", "--output-format",
     "--fixable", "--unfixable", "--per-file-ignores", "--range"}
)  # fmt: skip
_RUFF_FORMAT: Final = Formatter(
    "ruff format", (*_PYTHON, ".ipynb"), _unless("--check", "--diff"),
    long_values=_RUFF_VALUES, default_here=True,
)  # fmt: skip
_RUFF_CHECK: Final = Formatter(
    "ruff check --fix", (*_PYTHON, ".ipynb"),
    lambda o: o.has("--fix", "--fix-only") and not o.has("--diff", "--no-fix"),
    long_values=_RUFF_VALUES, default_here=True,
)  # fmt: skip
FORMATTERS: Final = {
    "black": Formatter(
        "black", _PYTHON, _unless("--check", "--diff"), short_values="ltSCcW",
        long_values=frozenset({"--line-length", "--target-version", "--config", "--include",
                               "--exclude", "--extend-exclude", "--force-exclude", "--workers",
                               "--required-version", "--python-cell-magics"}),
    ),
    "isort": Formatter(
        "isort", _PYTHON, _unless("--check-only", "-c", "--check", "--diff", "--df"),
        short_values="lpo", long_values=frozenset({"--settings-path", "--settings-file",
                                                  "--profile", "--line-length", "--src"}),
    ),
    "autopep8": Formatter("autopep8", _PYTHON, _only_with("-i", "--in-place"),
                          long_values=frozenset({"--select", "--ignore", "--max-line-length"})),
    "prettier": Formatter(
        "prettier --write", None, _only_with("--write", "-w"),
        long_values=frozenset({"--config", "--plugin", "--parser", "--ignore-path",
                               "--log-level", "--print-width", "--tab-width",
                               "--trailing-comma", "--end-of-line", "--cache-location"}),
    ),
    "eslint": Formatter(
        "eslint --fix", _SCRIPTS, _only_with("--fix"), short_values="cfo",
        long_values=frozenset({"--config", "--ext", "--rule", "--parser", "--format",
                               "--output-file", "--plugin", "--resolve-plugins-relative-to",
                               "--ignore-path", "--max-warnings", "--cache-location"}),
    ),
    "gofmt": Formatter("gofmt -w", (".go",), _only_with("-w"), short_values="r"),
    "rustfmt": Formatter("rustfmt", (".rs",), _unless("--check"),
                         long_values=frozenset({"--edition", "--config-path", "--config",
                                                "--emit", "--color"})),
    "clang-format": Formatter("clang-format -i", None, _only_with("-i"),
                              long_values=frozenset({"--style", "--assume-filename"})),
}  # fmt: skip


def ruff(args: list[Arg], place: Place) -> Effects:
    if not args or args[0] not in ("format", "check"):
        return Effects()
    return _formats(_RUFF_FORMAT if args[0] == "format" else _RUFF_CHECK, args[1:], place)


def _rule(formatter: Formatter) -> Rule:
    return lambda args, place: _formats(formatter, args, place)


def _formats(formatter: Formatter, args: list[Arg], place: Place) -> Effects:
    options = read_options(
        args, short_values=formatter.short_values, long_values=formatter.long_values
    )
    if not formatter.writes(options):
        return Effects()
    paths = [p for p in options.operands if p != "-"]
    if not paths and formatter.default_here:
        paths = ["."]
    effects = Effects()
    for path in paths:
        if path is None:
            effects.unknown.append(f"`{formatter.name}` is given a path only known when it runs")
            continue
        found = _source_files(path, formatter.suffixes, place)
        if found is None:
            effects.unknown.append(
                f"`{formatter.name}` would rewrite more files under {path} than the guard "
                "lists: name the files to format"
            )
        else:
            effects.files.extend(found)
    return effects


def _source_files(path: str, suffixes: tuple[str, ...] | None, place: Place) -> list[str] | None:
    """The files the tool would rewrite for operand `path` (relative like `path`); None when
    there are too many, or when `path` is relative to an unknown directory."""
    if place.cwd is None and not os.path.isabs(path):
        return None
    base = place.cwd or "/"
    full = os.path.join(base, path)
    if glob.has_magic(path):  # the tool expands quoted globs itself (prettier "src/**/*.ts")
        matches = glob.glob(full, recursive=True)
        return [os.path.relpath(m, base) for m in matches if _wanted(m, suffixes)][:_MAX_FILES]
    if not os.path.isdir(full):
        return [path]  # a file named directly is formatted whatever its suffix
    found: list[str] = []
    for root, dirs, files in os.walk(full):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith(".")]
        for name in files:
            if _wanted(name, suffixes):
                found.append(os.path.relpath(os.path.join(root, name), base))
        if len(found) > _MAX_FILES:
            return None
    return found


def _wanted(name: str, suffixes: tuple[str, ...] | None) -> bool:
    return suffixes is None or name.endswith(suffixes)


RULES: Final[dict[str, Rule]] = {
    "ruff": ruff,
    **{name: _rule(formatter) for name, formatter in FORMATTERS.items()},
}
