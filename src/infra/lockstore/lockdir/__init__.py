"""The lock directory backend: the embedded default, for agents on one machine.

Locks are atomic directory renames in one private directory, waiters stand in FIFO queues of
numbered entries, a holder's liveness is its process, and wake-ups come by inotify. Code
outside the lock store takes `LockStore`, `LockDir` and `default_lock_dir` from
`lockyard.infra.lockstore`.
"""
