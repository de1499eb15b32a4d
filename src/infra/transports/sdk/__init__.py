"""The lock tools as an in-process MCP server for claude-agent-sdk agents."""
