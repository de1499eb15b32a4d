"""Agent hooks: the PostToolUse lock-event hook and the three guards (write, commit, shell)."""
