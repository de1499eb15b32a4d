"""Agent CLIs (Claude Code, Codex CLI, OpenCode, Gemini CLI): their hook payloads and answers."""
