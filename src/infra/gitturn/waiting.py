"""Waiting for a turn: for a process to end, and for git's own lock files to go.

A process is waited on through a pidfd (readable once it has exited, zombie or not), polled
as a fallback where the kernel has none. Git's lock files (`index.lock`, `HEAD.lock`,
`packed-refs.lock`, `config.lock`) carry no owner, so they are polled, with a growing pause:
a git run outside lockyard (a person at a terminal) is waited for, never broken.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from typing import Final

from ..clone_state import GitDirs
from ..session.process_tree import ProcessRef, is_alive

_FIRST_PAUSE: Final = 0.01
_LONGEST_PAUSE: Final = 0.25


def wait_for_end(holder: ProcessRef, until: float) -> bool:
    """Wait until the process `holder` has ended or the monotonic clock reaches `until`;
    whether it has ended."""
    try:
        pidfd = os.pidfd_open(holder.pid)
    except ProcessLookupError:
        return True
    except OSError:  # no pidfd here (an old kernel, a seccomp filter): look now and then
        return _poll_until(lambda: not is_alive(holder), until)
    try:
        # The pid could have been reused between the ticket and the pidfd: the pidfd names the
        # process that has the pid now, so it must still be the holder.
        if not is_alive(holder):
            return True
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return False
            if poller.poll(max(1, int(left * 1000))):
                return True
    finally:
        os.close(pidfd)


def lock_files(dirs: GitDirs) -> tuple[str, ...]:
    """The lock files of git's that a turn waits for: this worktree's index and HEAD, the
    clone's packed refs and config."""
    return (
        os.path.join(dirs.git_dir, "index.lock"),
        os.path.join(dirs.git_dir, "HEAD.lock"),
        os.path.join(dirs.common_dir, "packed-refs.lock"),
        os.path.join(dirs.common_dir, "config.lock"),
    )


def held_lock_file(paths: tuple[str, ...]) -> str | None:
    """The first of `paths` that exists (a git command holds it), or None."""
    for path in paths:
        if os.path.lexists(path):
            return path
    return None


def wait_for_lock_files(paths: tuple[str, ...], until: float) -> str | None:
    """Wait until none of `paths` exists or the monotonic clock reaches `until`; the one still
    there at the end, or None."""
    _poll_until(lambda: held_lock_file(paths) is None, until)
    return held_lock_file(paths)


def _poll_until(done: Callable[[], bool], until: float) -> bool:
    pause = _FIRST_PAUSE
    while not done():
        left = until - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, _LONGEST_PAUSE)
    return True
