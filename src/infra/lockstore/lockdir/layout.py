"""The lock directory's layout: how its entries are named, and how a record is written in one.

Layout (all names relative to one private directory, opened once and used through its fd):

    <name>.lock/<token>        a lock: a directory holding exactly one entry, named by the
                               grant token, whose content is the holder record
    <name>.tmp-<token>/<token> a grant being published, or staged by a queue's head for a
                               release to hand over (same file system)
    <name>.q/<ticket>          the wait queue of a lock, entries numbered in arrival order;
                               exists only while it has entries; an entry's mtime is the
                               moment its turn began
    <name>.bell-<token>        the doorbell of a waiting head (a FIFO, `sleep.py`)
    <name>.shared/<agent hash> a shared hold of lock `name`: the member's full holder record
                               (`"mode":"shared"`); the directory exists only while it has
                               members (`shared_holds.py`)
    <card>.card                a holder card: the part of holder records that stays the same
                               from grant to grant (agent, process, key, checkout), named by
                               a hash of its text, written once and shared by every grant
                               that names it

How a lock is published and released atomically: `disk.py`.

Records are the target of a symlink (one atomic syscall, read with readlink, never followed),
or a small file when too long for a symlink target. A grant's record is short,
`@<card>:<acquired at>`: under the length a file system keeps inside the symlink's inode
(60 bytes on ext4, 128 on tmpfs), so a grant allocates no data block or page; readers see
it spelled out in full, the card's text with the token and the time added (`LockDir.read_lock`).
Full records (an agent's claim on its id, `crossproc/agent_claims.py`) read as they are.

Who handles which entries: `disk.LockDir` (the directory itself and its locks),
`stagings.Stagings`, `queues.QueueEntries` and `cards.HolderCards`. None decides anything:
the line (`line.py`) does, through their operations.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
from typing import Final

from ..errors import CorruptRecordError, LockDirError
from ..own_files import NotOwnFileError, read_own_file

LOCK_SUFFIX: Final = ".lock"
QUEUE_SUFFIX: Final = ".q"
STAGING_MARK: Final = ".tmp-"
BELL_MARK: Final = ".bell-"
PARTIAL_SUFFIX: Final = ".part"
"""A record file being written, before it is linked into place (`write_record`)."""
CARD_SUFFIX: Final = ".card"
SHARED_SUFFIX: Final = ".shared"
_AGENT_HASH_CHARS: Final = 24
CARD_MARK: Final = "@"
"""The first character of a grant record that names its holder card."""
TICKET_DIGITS: Final = 20
DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""How an entry of ours that is a directory is opened: never through a symlink."""
BUSY: Final = (errno.ENOTEMPTY, errno.EEXIST)
"""A rename onto a lock that holds a grant fails with one of these."""
NO_SPACE: Final = (errno.ENOSPC, errno.EDQUOT)
"""The file system (or the user's quota) is full: LockDirFullError."""
_SYMLINK_RECORD_MAX: Final = 4000
_SMALL_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def read_small_file(path: str | os.PathLike[str], max_bytes: int) -> bytes | None:
    """The first `max_bytes` of a small file the store keeps beside its locks (the policy, an
    agent's revocation notices); None when it is absent or cannot be read. Never follows a
    symlink, and never blocks on a FIFO planted at its name."""
    try:
        descriptor = os.open(path, _SMALL_FILE_FLAGS)
    except OSError:
        return None
    try:
        return os.read(descriptor, max_bytes)
    except OSError:
        return None
    finally:
        os.close(descriptor)


def entry_error(name: str, error: OSError) -> LockDirError:
    return LockDirError(
        f"{name} in the lock directory is not a directory the store wrote "
        f"({error.strerror}); something else put it there. Remove it to unblock that lock"
    )


def write_record(dir_fd: int, entry: str, record: str) -> None:
    """Make `entry` (in the directory `dir_fd`) hold `record`, complete before it is visible
    under that name; FileExistsError when the name is taken (creation is exclusive)."""
    if len(record) <= _SYMLINK_RECORD_MAX:
        os.symlink(record, entry, dir_fd=dir_fd)
        return
    # Too long for a symlink target: write a file under a hidden name, then link it into
    # place (a link, unlike a rename, never replaces an existing entry).
    partial = entry + PARTIAL_SUFFIX
    record_fd = os.open(
        partial,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
        dir_fd=dir_fd,
    )
    try:
        try:
            unwritten = memoryview(record.encode())
            while unwritten:  # a short write (a file system filling up) is written on
                unwritten = unwritten[os.write(record_fd, unwritten) :]
        finally:
            os.close(record_fd)
        os.link(partial, entry, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(partial, dir_fd=dir_fd)


def read_record(dir_fd: int, entry: str) -> str:
    try:
        return os.readlink(entry, dir_fd=dir_fd)
    except OSError as error:
        if error.errno != errno.EINVAL:  # EINVAL: not a symlink, a record file
            raise
    try:
        return read_own_file(entry, dir_fd=dir_fd).decode(errors="replace")
    except NotOwnFileError as error:
        raise CorruptRecordError(f"{entry} {error}; remove it to unblock that lock") from None


def member_entry(agent: str) -> str:
    """The entry naming `agent`'s shared hold: a hash of the id (ids may hold '/')."""
    return hashlib.sha256(agent.encode()).hexdigest()[:_AGENT_HASH_CHARS]


def shared_member_exists(dir_fd: int, name: str, agent: str) -> bool:
    """Whether `agent` holds lock `name` shared (one `faccessat` in the directory `dir_fd`)."""
    return os.access(
        f"{name}{SHARED_SUFFIX}/{member_entry(agent)}",
        os.F_OK,
        dir_fd=dir_fd,
        follow_symlinks=False,
    )
