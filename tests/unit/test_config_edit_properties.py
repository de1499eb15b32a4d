"""Property tests of what `lockyard init` / `uninstall` do to a person's files, over generated
JSON (strict and with comments), TOML and Markdown files:

- `init` then `uninstall` gives back the same bytes (and the same absent files);
- `init` keeps every byte the file had, in order (it only inserts), and what it inserts makes
  a file that JSON / TOML readers still read, with the user's values unchanged;
- `init` again changes nothing; a refused edit changes nothing at all.

Each example runs the real setups (`SETUPS`, a `Plan`, `apply`) on a real directory.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lockyard.infra.agentcli.config_files import ConfigFileError, Plan, apply
from lockyard.infra.agentcli.json_edit import parse, value_of
from lockyard.infra.agentcli.marked_blocks import MARKDOWN_COMMENT, with_block, without_block
from lockyard.infra.agentcli.setups import SETUPS, Invocation

STRICT_JSON = (".mcp.json", ".claude/settings.json", ".codex/hooks.json")
COMMENTED_JSON = (".gemini/settings.json", "opencode.json")
MARKDOWN = ("CLAUDE.md", "AGENTS.md", "GEMINI.md")
TOML = ".codex/config.toml"

# --- generators -------------------------------------------------------------------------

_WS = ["", " ", "  ", "\n", "\n  ", "\n    ", "\t", "\n\t", "\r\n", "\r\n  ", " \n "]
_COMMENTS = ["/* c */", "// note\n", " /**/ ", "// a, b: c }\n"]
_NUMBERS = ["0", "-0", "1e400", "-1E-400", "3.25", "12345678901234567890123", "1E+2", "0.5e-7"]
_KEYS = ["mcpServers", "hooks", "permissions", "allow", "enabledMcpjsonServers", "mcp",
         "PreToolUse", "BeforeTool", "lockyard", "a", "b", "command", "args"]  # fmt: skip


# Strategies are built once, outside the draws: a strategy made inside a draw is validated
# again on every draw, which cost more than the test itself (~40 ms a document).
_PLAIN_WS = st.sampled_from(_WS)
_COMMENTED_WS = st.one_of(
    _PLAIN_WS, st.tuples(_PLAIN_WS, st.sampled_from(_COMMENTS), _PLAIN_WS).map("".join)
)
_STRING = st.one_of(
    st.sampled_from(['"\\u00e9"', '"\\/"', '"a\\"b"', '"\\ud800"', '""']),
    st.builds(json.dumps, st.text(max_size=6), ensure_ascii=st.booleans()),
)
_KEY = st.one_of(st.sampled_from(_KEYS).map(json.dumps), _STRING)


def _whitespace(comments: bool) -> st.SearchStrategy[str]:
    return _COMMENTED_WS if comments else _PLAIN_WS


def _json_object(values: st.SearchStrategy[str], comments: bool) -> st.SearchStrategy[str]:
    ws = _whitespace(comments)
    members = st.lists(st.tuples(_KEY, values), max_size=4)

    @st.composite
    def build(draw: st.DrawFn) -> str:
        drawn = draw(members)
        if not drawn:
            return "{" + draw(ws) + "}"
        parts = [
            draw(ws) + key + draw(ws) + ":" + draw(ws) + value + draw(ws) for key, value in drawn
        ]
        trailing = "," + draw(ws) if comments and draw(st.booleans()) else ""
        return "{" + ",".join(parts) + trailing + "}"

    return build()


def _json_array(values: st.SearchStrategy[str], comments: bool) -> st.SearchStrategy[str]:
    ws = _whitespace(comments)
    items = st.lists(values, max_size=4)

    @st.composite
    def build(draw: st.DrawFn) -> str:
        drawn = draw(items)
        if not drawn:
            return "[" + draw(ws) + "]"
        return "[" + ",".join(draw(ws) + item + draw(ws) for item in drawn) + "]"

    return build()


def json_documents(comments: bool) -> st.SearchStrategy[str | None]:
    scalars = st.one_of(st.sampled_from([*_NUMBERS, "true", "false", "null"]), _STRING)
    values = st.recursive(
        scalars,
        lambda inner: st.one_of(_json_object(inner, comments), _json_array(inner, comments)),
        max_leaves=12,
    )
    ws = _whitespace(comments)
    document = st.tuples(
        st.sampled_from(["", "\ufeff"]), ws, _json_object(values, comments), ws
    ).map("".join)
    return st.one_of(st.none(), st.sampled_from(["", "\n", " \r\n"]), document)


_MD_LINES = ["# Notes", "", "text", "tail", "<!-- lockyard:begin -->", "<!-- lockyard:end -->",
             "```", "~~~", "  <!-- lockyard:end -->", "<!-- lockyard:begin sha256:x -->",
             "# lockyard:begin", "\t- item"]  # fmt: skip


@st.composite
def markdown_documents(draw: st.DrawFn) -> str | None:
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    lines = draw(st.lists(st.one_of(st.sampled_from(_MD_LINES), st.text(max_size=8)), max_size=8))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    ending = draw(st.sampled_from(["", newline]))
    return newline.join(lines) + (ending if lines else "")


_TOML_LINES = [
    'model = "o4"',
    "# a comment",
    "",
    "[profile]",
    "x = 1",
    '[mcp_servers.db]\ncommand = "pg"\nargs = ["a", "b"]',
    'notes = """\n# lockyard:begin sha256:0123456789ab\nkeep\n# lockyard:end\n"""',
    "lit = '''\n# lockyard:end\n'''",
    'quote = "# lockyard:begin"',
    "[[list]]\nn = 2",
    "inline = { a = 1, b = [1, 2] }",
    'esc = """a\\\n  b"""',
]


@st.composite
def toml_documents(draw: st.DrawFn) -> str | None:
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    lines = draw(st.lists(st.sampled_from(_TOML_LINES), max_size=6, unique=True))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    text = newline.join(line.replace("\n", newline) for line in lines)
    text += draw(st.sampled_from(["", newline])) if lines else ""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        assume(False)
    return text


commands = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12).filter(
    lambda text: text.strip() != ""
)
lock_dirs = st.one_of(st.none(), st.sampled_from(["/tmp/locks", "rel dir", "ü/$HOME"]))


# --- running the real setups on a real directory ------------------------------------------


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as directory:
        yield Path(directory)


def _fresh(scratch: Path, files: dict[str, str | None]) -> Path:
    root = Path(tempfile.mkdtemp(dir=scratch))
    for name, text in files.items():
        if text is not None:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(text.encode("utf-8", "surrogatepass"))
    return root


def _tree(root: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            found[os.path.relpath(path, root)] = Path(path).read_bytes()
    return found


def _init(root: Path, how: Invocation) -> bool:
    plan = Plan(root)
    try:
        for setup in SETUPS.values():
            setup.install(plan, how)
        changes = plan.changes()
    except ConfigFileError:
        return False
    apply(changes)
    return True


def _uninstall(root: Path) -> None:
    plan = Plan(root)
    chosen = [setup for setup in SETUPS.values() if setup.installed(plan)]
    assert len(chosen) == len(SETUPS)
    for setup in chosen:
        setup.uninstall(plan, [other for other in SETUPS.values() if other not in chosen])
    apply(plan.changes())


def _is_subsequence(small: bytes, large: bytes) -> bool:
    found = iter(large)
    return all(byte in found for byte in small)


def _check_init_then_uninstall(
    scratch: Path, files: dict[str, str | None], how: Invocation
) -> None:
    root = _fresh(scratch, files)
    before = _tree(root)
    if not _init(root, how):
        assert _tree(root) == before  # a refusal writes nothing
        return
    installed = _tree(root)
    for name, text in files.items():
        if text is None:
            continue
        old, new = text.encode("utf-8", "surrogatepass"), installed[name]
        assert new is not None
        assert _is_subsequence(old, new), name  # only insertions
        if name in STRICT_JSON and text.strip():
            new_value = json.loads(new.decode().removeprefix("\ufeff"))
            assert _users_values(new_value, json.loads(text.removeprefix("\ufeff"))), name
        if name == TOML:
            assert tomllib.loads(new.decode())["mcp_servers"]["lockyard"]["command"] == how.command
    assert _init(root, how)
    assert _tree(root) == installed  # again: nothing changes
    _uninstall(root)
    assert _tree(root) == before


def _users_values(new: object, old: object) -> bool:
    """Every value the user had is still there (lockyard's entries may be added)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return all(key in new and _users_values(new[key], value) for key, value in old.items())
    if isinstance(old, list) and isinstance(new, list):
        return len(new) >= len(old) and all(
            _users_values(a, b) for a, b in zip(new, old, strict=False)
        )
    return bool(old == new)


PROPERTY = settings(
    max_examples=int(os.environ.get("LOCKYARD_PROPERTY_EXAMPLES", "40")), deadline=None
)


@PROPERTY
@given(
    files=st.fixed_dictionaries(
        {name: json_documents(comments=False) for name in STRICT_JSON}
        | {name: json_documents(comments=True) for name in COMMENTED_JSON}
        | {name: markdown_documents() for name in MARKDOWN}
        | {TOML: toml_documents()}
    ),
    command=commands,
    lock_dir=lock_dirs,
)
def test_every_file_comes_back_byte_for_byte(
    scratch: Path, files: dict[str, str | None], command: str, lock_dir: str | None
) -> None:
    """One example holds every kind of file: the setups' run, not the files, is the cost."""
    _check_init_then_uninstall(scratch, files, Invocation(command, lock_dir))


@settings(max_examples=200, deadline=None)
@given(text=json_documents(comments=False))
def test_the_span_parser_reads_what_python_json_reads(text: str | None) -> None:
    assume(text is not None and text.strip(" \n\r\t\ufeff"))
    assert text is not None
    root = parse(Path("x.json"), text)
    assert root is not None
    assert value_of(text, root) == json.loads(text.removeprefix("\ufeff"))


@settings(max_examples=200, deadline=None)
@given(
    text=markdown_documents(),
    body=st.text(
        st.characters(blacklist_characters="\r", blacklist_categories=("Cs",)), max_size=30
    ),
)
def test_a_markdown_block_goes_in_and_out_exactly(text: str | None, body: str) -> None:
    path = Path("CLAUDE.md")
    assume(MARKDOWN_COMMENT.end not in body.split("\n"))
    try:
        added = with_block(path, text, body, MARKDOWN_COMMENT)
    except ConfigFileError:
        return  # a marker with a checksum that does not match: refused
    if text is not None:
        assert added.startswith(text)
    assert without_block(path, added, MARKDOWN_COMMENT) == text
