"""The lock tools as an MCP server over stdio (`lockyard serve`), one process per agent session."""
