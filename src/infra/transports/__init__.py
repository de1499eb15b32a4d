"""The ways an agent reaches the lock tools, one folder each: `sdk` (in-process), `stdio`, `ipc`."""
