"""What the lock tools accept: input models, JSON schemas, descriptions and error texts.

Shared by every transport (the in-process SDK server and `lockyard serve`), so the model sees
the same tools and the same messages everywhere. Texts are written for an LLM: short, exact,
and saying what to do next.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from ..lockstore import MAX_TIMEOUT_SECONDS as MAX_TIMEOUT_SECONDS

ACQUIRE_TOOL: Final = "lock_acquire"
RELEASE_TOOL: Final = "lock_release"
STATUS_TOOL: Final = "lock_status"

MAX_FILES_PER_CALL: Final = 256
"""More files than this in one call is almost certainly a mistake (a glob gone wrong)."""
DEFAULT_TIMEOUT_SECONDS: Final = 30.0
MAX_PATH_LENGTH: Final = 4096

FilePath = Annotated[StrictStr, StringConstraints(min_length=1, max_length=MAX_PATH_LENGTH)]


def _check_paths(paths: list[str]) -> list[str]:
    for path in paths:
        if not path.strip() or "\x00" in path:
            raise ValueError("blank path or NUL byte")
    return paths


class AcquireInput(BaseModel):
    """Arguments of `lock_acquire`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    filepaths: list[FilePath] = Field(min_length=1, max_length=MAX_FILES_PER_CALL)
    timeout_seconds: StrictInt | StrictFloat = Field(
        default=DEFAULT_TIMEOUT_SECONDS, ge=0, le=MAX_TIMEOUT_SECONDS
    )

    mode: Literal["exclusive", "shared"] = "exclusive"

    @field_validator("filepaths")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        return _check_paths(paths)

    @field_validator("timeout_seconds")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("not finite")
        return value


class ReleaseInput(BaseModel):
    """Arguments of `lock_release`: exactly one of `filepaths` or `all: true`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    filepaths: list[FilePath] | None = Field(
        default=None, min_length=1, max_length=MAX_FILES_PER_CALL
    )
    all: StrictBool = False

    @field_validator("filepaths", mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        # Only leaving the key out means "not given": the schema forbids null, so do we.
        if value is None:
            raise ValueError("null")
        return value

    @field_validator("filepaths")
    @classmethod
    def _paths(cls, paths: list[str] | None) -> list[str] | None:
        return None if paths is None else _check_paths(paths)

    @model_validator(mode="after")
    def _exactly_one(self) -> ReleaseInput:
        if self.all and self.filepaths is not None:
            raise ValueError("both")
        if not self.all and self.filepaths is None:
            raise ValueError("neither")
        return self


class StatusInput(BaseModel):
    """Arguments of `lock_status`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    filepaths: list[FilePath] = Field(min_length=1, max_length=MAX_FILES_PER_CALL)

    @field_validator("filepaths")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        return _check_paths(paths)


# --- JSON schemas ------------------------------------------------------------------------
# A string "type" plus "properties" (else the SDK misreads the dict) and no top-level oneOf
# (the CLI strips it before the model sees it): the either/or rule of lock_release lives in
# the descriptions and in ReleaseInput.

_FILEPATHS_SCHEMA: Final[dict[str, Any]] = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_PATH_LENGTH},
    "minItems": 1,
    "maxItems": MAX_FILES_PER_CALL,
}

ACQUIRE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "filepaths": {
            **_FILEPATHS_SCHEMA,
            "description": (
                "Every file you are about to edit, all in this one call: paths relative to "
                f"the repository root, or absolute inside it. 1 to {MAX_FILES_PER_CALL}. "
                "A directory written with a trailing slash (src/api/) locks everything "
                "under it, a glob (src/**/*.py) the files it matches: files created later "
                "included."
            ),
        },
        "timeout_seconds": {
            "type": "number",
            "minimum": 0,
            "maximum": MAX_TIMEOUT_SECONDS,
            "default": DEFAULT_TIMEOUT_SECONDS,
            "description": (
                "How long to wait for files other agents hold. 0 never waits: take what is "
                f"free and report the rest. Default {DEFAULT_TIMEOUT_SECONDS:g}, "
                f"at most {MAX_TIMEOUT_SECONDS}."
            ),
        },
        "mode": {
            "type": "string",
            "enum": ["exclusive", "shared"],
            "default": "exclusive",
            "description": (
                '"shared" when you only need the files not to change while you read or '
                "test them: other readers hold them with you, nobody edits them, you cannot "
                'either (lock again with "exclusive" to edit). Default "exclusive".'
            ),
        },
    },
    "required": ["filepaths"],
    "additionalProperties": False,
}

RELEASE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "filepaths": {
            **_FILEPATHS_SCHEMA,
            "description": "The files to unlock. Give this or all=true, not both.",
        },
        "all": {
            "type": "boolean",
            "description": "true unlocks every file you hold. Give this or filepaths, not both.",
        },
    },
    "additionalProperties": False,
}

STATUS_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "filepaths": {
            **_FILEPATHS_SCHEMA,
            "description": (
                "The files, directories (src/api/) or globs (src/**/*.py) to look at: "
                "repository-relative, or absolute inside it."
            ),
        },
    },
    "required": ["filepaths"],
    "additionalProperties": False,
}

ACQUIRE_DESCRIPTION: Final = (
    "Lock files before you edit them. Pass EVERY file you will edit in ONE call. "
    "Files are locked in sorted order; the result lists each file by its canonical path with "
    '"acquired" (you hold it), "holder" (who holds it) or "blocked_by" (a directory, glob or '
    'readers in the way), and "all_acquired". Files you already hold stay yours. If others '
    "hold some files, the call waits up to timeout_seconds until one of them is granted, then "
    "returns: call again for the rest. timeout_seconds=0 never waits. On timeout you keep "
    'what you got. If the result has a "deadlock" object, all your locks were released for '
    'you: follow its "instruction". Lock a directory ("src/api/", trailing slash) instead of '
    "listing its files when you change many files under it, create files there, or run a "
    'command over the tree (a formatter, a rename). A glob ("src/**/*.py") locks the files it '
    'matches, later ones too. mode "shared" keeps files from changing while you read or test '
    "them, alongside other readers; it allows no edits."
)

RELEASE_DESCRIPTION: Final = (
    "Unlock files when you are done with them (after your edits are saved or committed). "
    'Pass {"filepaths": [...]} for some files, or {"all": true} for every file you hold: '
    "exactly one of the two. Releasing a file you do not hold does nothing and is not an "
    'error. The result lists the canonical paths released and their "count".'
)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as every transport publishes it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


STATUS_DESCRIPTION: Final = (
    "Look at files' locks without taking them: for each file, who holds it and for how long "
    '("held_by"), who waits in line ("waiting", first come first served), whether you hold or '
    'wait for it, "overlapping" (directory and glob locks over it; for a directory or glob, '
    'the locks it covers), and "would_be_granted" (a lock_acquire now would get it at once). '
    "It never waits, queues or changes anything. Use it to plan which files to work on first; to "
    "edit a file you still need lock_acquire."
)

ACQUIRE_SPEC: Final = ToolSpec(ACQUIRE_TOOL, ACQUIRE_DESCRIPTION, ACQUIRE_SCHEMA)
RELEASE_SPEC: Final = ToolSpec(RELEASE_TOOL, RELEASE_DESCRIPTION, RELEASE_SCHEMA)
STATUS_SPEC: Final = ToolSpec(STATUS_TOOL, STATUS_DESCRIPTION, STATUS_SCHEMA)
TOOL_SPECS: Final[tuple[ToolSpec, ...]] = (ACQUIRE_SPEC, RELEASE_SPEC, STATUS_SPEC)
TOOL_NAMES: Final[tuple[str, ...]] = tuple(spec.name for spec in TOOL_SPECS)


# --- Error texts -------------------------------------------------------------------------


class InvalidToolInputError(ValueError):
    """The arguments of a tool call were rejected; `str(exc)` is the text the model sees."""


_FIELD_RULES: Final[dict[str, dict[str, str]]] = {
    ACQUIRE_TOOL: {
        "filepaths": (
            f'"filepaths" must be a list of 1 to {MAX_FILES_PER_CALL} non-blank file path strings'
        ),
        "timeout_seconds": (
            f'"timeout_seconds" must be a number from 0 to {MAX_TIMEOUT_SECONDS} (0 = do not wait)'
        ),
        "mode": (
            '"mode" must be "exclusive" (to edit; the default) or "shared" (to read alongside '
            "other readers)"
        ),
    },
    RELEASE_TOOL: {
        "filepaths": (
            f'"filepaths" must be a list of 1 to {MAX_FILES_PER_CALL} non-blank file path '
            'strings (to unlock everything pass {"all": true} instead)'
        ),
        "all": '"all" must be true or false',
    },
    STATUS_TOOL: {
        "filepaths": (
            f'"filepaths" must be a list of 1 to {MAX_FILES_PER_CALL} non-blank file path strings'
        ),
    },
}

_EXAMPLES: Final[dict[str, str]] = {
    ACQUIRE_TOOL: '{"filepaths": ["src/app.py", "tests/test_app.py"], "timeout_seconds": 0}',
    RELEASE_TOOL: '{"filepaths": ["src/app.py"]} or {"all": true}',
    STATUS_TOOL: '{"filepaths": ["src/app.py", "tests/test_app.py"]}',
}

_NOTHING_CHANGED: Final[dict[str, str]] = {
    ACQUIRE_TOOL: "Nothing was locked.",
    RELEASE_TOOL: "Nothing was released.",
    STATUS_TOOL: "Nothing was looked at.",
}


M = TypeVar("M", bound=BaseModel)


def invalid_input_text(tool: str, problems: list[str]) -> str:
    """The full error text for a rejected call: what is wrong, that nothing changed, an example."""
    listed = "; ".join(dict.fromkeys(problems))
    return (
        f"{tool} rejected its arguments: {listed}. {_NOTHING_CHANGED[tool]} "
        f"Call it again like {_EXAMPLES[tool]}."
    )


def _explain(tool: str, error: ValidationError) -> list[str]:
    rules = _FIELD_RULES[tool]
    allowed = " and ".join(f'"{name}"' for name in rules)
    problems: list[str] = []
    for item in error.errors():
        field = str(item["loc"][0]) if item["loc"] else ""
        if item["type"] == "extra_forbidden":
            problems.append(f'unknown argument "{field}" ({tool} takes only {allowed})')
        elif item["type"] == "missing":
            problems.append(f'"{field}" is missing ({rules[field].split(" ", 1)[1]})')
        elif field == "filepaths" and len(item["loc"]) == 1 and item["type"] == "too_short":
            problems.append('"filepaths" is empty: list the files by path')
        elif field == "filepaths" and len(item["loc"]) == 1 and item["type"] == "too_long":
            problems.append(
                f'"filepaths" has more than {MAX_FILES_PER_CALL} files: lock fewer files per '
                "call (lock what the next step edits)"
            )
        elif field in rules:
            problems.append(rules[field])
        elif "both" in str(item.get("ctx", {}).get("error", "")):
            problems.append('give "filepaths" or "all": true, not both')
        else:
            problems.append('give either "filepaths" (a list of files) or "all": true')
    return problems


def parse_arguments(tool: str, model: type[M], arguments: object) -> M:
    """Validate raw tool arguments into `model`, or raise InvalidToolInputError (LLM text)."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise InvalidToolInputError(
            invalid_input_text(tool, ["the arguments must be a JSON object"])
        )
    try:
        return model.model_validate(dict(arguments))
    except ValidationError as exc:
        raise InvalidToolInputError(invalid_input_text(tool, _explain(tool, exc))) from None
