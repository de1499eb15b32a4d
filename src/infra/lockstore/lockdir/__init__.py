"""The lock directory backend: the embedded default, for agents on one machine.

Locks are atomic directory renames in one private directory, waiters stand in FIFO queues of
numbered entries, a holder's liveness is its process, and wake-ups come by inotify. Code
outside the lock store takes `LockStore`, `LockDir` and `default_lock_dir` from
`lockyard.infra.lockstore`.

A lock taken or waited for, in reading order: `store.py` (the public face) hands it to
`scopes.py` (every request's decisions, among the readers of `shared_holds.py` and the
directory and glob locks, their marks in `scope_marks.py`, the globs held in
`glob_index.py`), which carries out its steps with `operations.py` (the line carried out),
which runs `line.py`'s decisions (no I/O) on the entries of `disk.py` and sleeps with
`sleep.py` where a decision says to. The rest: a path's key (`keys.py`), the journal
(`lock_journal.py`), each agent's heartbeat and revocations (`agents.py`), the settings
(`policy.py`), what dead processes left (`reclamation.py`), what status and the monitor read
(`reporting.py`), where the directory is (`location.py`).
"""
