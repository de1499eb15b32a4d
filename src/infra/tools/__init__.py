"""The agent lock tools, independent of transport: inputs, outcomes, names, the MCP server."""
