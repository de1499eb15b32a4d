"""Agent CLI sessions: who a CLI session is, found from the process tree, with no configuration."""
