"""What each agent last saw of each file, so no write is made from a stale read (issue 29).

`version.py` says what a version of a file is and whether a file still has it; `book.py`
keeps, per clone, the version each agent last saw and the last write a guard allowed;
`stale.py` is the one check the write, shell and commit guards and `lock_acquire` share.
Standard library only: the agent CLI hooks use it in a process of their own per tool call.
"""
