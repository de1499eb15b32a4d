"""Sandboxed agents: the lock tools over a file IPC folder (wire format, host, client)."""
