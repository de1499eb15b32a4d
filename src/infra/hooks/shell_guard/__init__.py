"""The shell guard: writes made through a shell command are checked before the command runs.

`decide.decide_shell_command(command, cwd, agent_id, store)` -> `Decision` is the one entry
point (the SDK hook in `hook.py` and the agent-CLI hooks call it). One module per job:
`syntax` parses (tree-sitter's Bash grammar), `words` expands words, `utilities`,
`oneliners`, `formatters` and `git` know what commands write, `targets` walks a command line
for its write targets, `decide` checks them against the lock store. The SDK hook (`hook.py`)
loads claude_agent_sdk: agent-CLI hooks (one process per tool call) import `decide` alone.
"""
