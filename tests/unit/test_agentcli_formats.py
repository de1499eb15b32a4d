"""Each agent CLI's hook payloads read into tool calls, and denies written in its format."""

from __future__ import annotations

import json

import pytest

from lockyard.infra.agentcli.formats import ACQUIRE_TOOL as HOOK_ACQUIRE_TOOL
from lockyard.infra.agentcli.formats import FORMATS, PayloadError
from lockyard.infra.hooks.patch_paths import patch_targets
from lockyard.infra.tools.tool_inputs import ACQUIRE_TOOL

PATCH = """*** Begin Patch
*** Add File: src/new.py
+print("hi")
*** Update File: src/old.py
@@
-a
+b
*** Move to: src/moved.py
*** Delete File: src/gone.py
*** Update File: src/old.py
*** End Patch
"""


def test_the_hooks_name_the_lock_tool_the_servers_publish() -> None:
    assert HOOK_ACQUIRE_TOOL == ACQUIRE_TOOL


def test_a_patch_writes_every_file_it_adds_updates_moves_or_deletes_once() -> None:
    assert patch_targets(PATCH) == ["src/new.py", "src/old.py", "src/moved.py", "src/gone.py"]
    assert patch_targets("no patch here") == []


@pytest.mark.parametrize(
    ("cli", "tool", "tool_input", "paths"),
    [
        ("claude-code", "Write", {"file_path": "a.py", "content": ""}, ["a.py"]),
        ("claude-code", "Edit", {"file_path": "/r/a.py"}, ["/r/a.py"]),
        ("claude-code", "MultiEdit", {"file_path": "a.py", "edits": []}, ["a.py"]),
        ("claude-code", "NotebookEdit", {"notebook_path": "n.ipynb"}, ["n.ipynb"]),
        ("codex", "apply_patch", {"command": PATCH}, patch_targets(PATCH)),
        ("codex", "apply_patch", {"patch": PATCH}, patch_targets(PATCH)),
        ("gemini", "write_file", {"file_path": "a.py", "content": ""}, ["a.py"]),
        ("gemini", "replace", {"file_path": "a.py", "old_string": "", "new_string": ""}, ["a.py"]),
        ("opencode", "write", {"filePath": "a.py", "content": ""}, ["a.py"]),
        ("opencode", "edit", {"filePath": "a.py"}, ["a.py"]),
        ("opencode", "patch", {"patchText": PATCH}, patch_targets(PATCH)),
        ("kilo", "apply_patch", {"patchText": PATCH}, patch_targets(PATCH)),
        ("qwen", "write_file", {"file_path": "/r/a.py", "content": ""}, ["/r/a.py"]),
        ("qwen", "edit", {"file_path": "a.py", "old_string": "", "new_string": ""}, ["a.py"]),
        ("qwen", "notebook_edit", {"notebook_path": "n.ipynb"}, ["n.ipynb"]),
        ("pi", "write", {"path": "a.py", "content": ""}, ["a.py"]),
        ("pi", "edit", {"path": "a.py", "edits": []}, ["a.py"]),
        # droid 0.215.0's payloads, as its hook received them
        ("droid", "Create", {"file_path": "/r/new.py", "content": "new\n"}, ["/r/new.py"]),
        ("droid", "Edit", {"file_path": "/r/a.py", "old_str": "a", "new_str": "b"}, ["/r/a.py"]),
        ("droid", "ApplyPatch", {"input": PATCH}, patch_targets(PATCH)),
        # Auggie 0.36.0's tool input schemas (its bundle; no Auggie ran here)
        ("auggie", "save-file", {"path": "new.py", "file_content": "x"}, ["new.py"]),
        (
            "auggie",
            "str-replace-editor",
            {"command": "str_replace", "path": "a.py", "old_str_1": "a", "new_str_1": "b"},
            ["a.py"],
        ),
        ("auggie", "remove-files", {"file_paths": ["a.py", "b/c.py"]}, ["a.py", "b/c.py"]),
    ],
)
def test_write_tools_are_read_with_the_paths_they_write(
    cli: str, tool: str, tool_input: dict[str, object], paths: list[str]
) -> None:
    call = FORMATS[cli].parse({"tool_name": tool, "tool_input": tool_input, "cwd": "/r"})
    assert (call.kind, call.paths, call.cwd) == ("write", paths, "/r")


@pytest.mark.parametrize(
    ("cli", "tool"),
    [
        ("claude-code", "Bash"),
        ("codex", "Bash"),
        ("gemini", "run_shell_command"),
        ("opencode", "bash"),
        ("kilo", "bash"),
        ("qwen", "run_shell_command"),
        ("pi", "bash"),
        ("droid", "Execute"),
        ("auggie", "launch-process"),
    ],
)
def test_shell_tools_are_read_with_their_command(cli: str, tool: str) -> None:
    call = FORMATS[cli].parse({"tool_name": tool, "tool_input": {"command": "git commit -a"}})
    assert (call.kind, call.command, call.cwd) == ("shell", "git commit -a", None)


def test_copilot_cli_payloads_are_read_from_its_camel_case_fields() -> None:
    copilot = FORMATS["copilot"]
    created = copilot.parse({"sessionId": "s", "cwd": "/r", "toolName": "create",
                             "toolArgs": {"path": "/r/a.py", "file_text": "x"}})  # fmt: skip
    assert (created.kind, created.paths, created.cwd) == ("write", ["/r/a.py"], "/r")
    edited = copilot.parse({"toolName": "edit", "toolArgs": {"path": "b.py", "old_str": ""}})
    assert edited.paths == ["b.py"]
    shell = copilot.parse({"toolName": "bash", "toolArgs": {"command": "ls", "description": ""}})
    assert (shell.kind, shell.command) == ("shell", "ls")
    assert copilot.parse({"toolName": "view", "toolArgs": {"path": "a"}}).kind == "other"
    with pytest.raises(PayloadError, match="no 'toolName'"):
        copilot.parse({"tool_name": "create", "tool_input": {"path": "a.py"}})


def test_other_tools_are_not_judged() -> None:
    call = FORMATS["claude-code"].parse({"tool_name": "Glob", "tool_input": {"pattern": "*"}})
    assert call.kind == "other"


@pytest.mark.parametrize(
    ("cli", "tool", "tool_input"),
    [
        ("claude-code", "Read", {"file_path": "a.py"}),
        ("gemini", "read_file", {"absolute_path": "a.py"}),
        ("opencode", "read", {"filePath": "a.py"}),
        ("droid", "Read", {"file_path": "a.py"}),
        ("auggie", "view", {"path": "a.py", "type": "file"}),
    ],
)
def test_each_cli_s_read_tool_is_a_read_of_its_file(
    cli: str, tool: str, tool_input: dict[str, str]
) -> None:
    call = FORMATS[cli].parse({"tool_name": tool, "tool_input": tool_input})
    assert (call.kind, call.paths) == ("read", ["a.py"])
    nameless = FORMATS[cli].parse({"tool_name": tool, "tool_input": {}})
    assert nameless.kind == "other"  # the read tool refuses it itself: nothing to note


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([1, 2], "JSON list, not an object"),
        ({"tool_input": {}}, "no 'tool_name'"),
        ({"tool_name": ""}, "no 'tool_name'"),
        ({"tool_name": "Write", "tool_input": "a.py"}, "no 'tool_input' object"),
        ({"tool_name": "Write", "tool_input": {"content": "x"}}, "names no file"),
        ({"tool_name": "Write", "tool_input": {"file_path": 7}}, "names no file"),
        ({"tool_name": "Bash", "tool_input": {"command": ["git"]}}, "no command string"),
        ({"tool_name": "Bash"}, "no command string"),
    ],
)
def test_payloads_missing_what_a_guard_needs_are_refused_with_the_reason(
    payload: object, message: str
) -> None:
    with pytest.raises(PayloadError, match=message):
        FORMATS["claude-code"].parse(payload)


def test_a_deny_is_written_in_each_clis_own_format() -> None:
    for cli in ("claude-code", "codex", "qwen", "droid", "auggie"):
        output = json.loads(FORMATS[cli].deny("locked").stdout)
        assert output == {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "locked",
            }
        }
    for cli in ("gemini", "opencode", "kilo", "pi"):
        assert json.loads(FORMATS[cli].deny("locked").stdout) == {
            "decision": "deny",
            "reason": "locked",
        }
    assert json.loads(FORMATS["copilot"].deny("locked").stdout) == {
        "permissionDecision": "deny",
        "permissionDecisionReason": "locked",
    }
    assert all(FORMATS[cli].allow().stdout == "" for cli in FORMATS)
    assert all(FORMATS[cli].deny("x").exit_code == 0 for cli in FORMATS)
