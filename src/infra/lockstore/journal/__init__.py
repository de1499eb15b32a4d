"""The journal: every grant, wait, release, hand-over, reclaim, pass-over, operator release,
denied write and deadlock, with its time, namespace, agent, session, file and process.

- `record.py`: `JournalRecord`, its kinds, its one-line JSON form (docs/observability.md);
- `files.py`: the lock directory's journal on disk, and its writer (standard library only);
- `scan.py`: reading a segment's bytes, trusting nothing in them;
- `denials.py`: a write a guard refused, journalled (by the hooks and the IPC host alike);
- `query.py`: `JournalQuery`, which records a reader wants (`file_glob.py`: its file globs,
  checked, as one regular expression for Python and PostgreSQL alike);
- `summary.py`: `Stats` (what `lockyard stats` shows), and sealed segments' summaries;
- `reader.py`: `JournalReader`, what every view reads; `file_journal.py`: the lock
  directory's. The PostgreSQL table and its reader are that backend's (`postgres/journal.py`).

Nothing here is imported by this package's `__init__`: an agent CLI's hook imports `files`
and `record` alone.
"""
