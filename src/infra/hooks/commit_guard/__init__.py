"""The commit guard: no `git commit` that would include a file this agent has not locked."""
