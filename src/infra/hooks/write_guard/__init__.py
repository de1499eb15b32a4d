"""The write guard: no Write/Edit of a repository file this agent has not locked."""
