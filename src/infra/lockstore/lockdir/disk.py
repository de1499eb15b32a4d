"""The lock directory on disk: how its entries are named, how a record is written in one, and
the atomic operations the line (`line.py`) takes and gives back a lock with. Nothing here
decides anything: the line does, through these operations.

Layout (all names relative to one private directory, opened once and used through its fd):

    <name>.lock/<token>        a lock: a directory holding exactly one entry, named by the
                               grant token, whose content is the holder record
    <name>.tmp-<token>/<token> a grant being published, or staged by a queue's head for a
                               release to hand over (same file system)
    <name>.q/<ticket>/<token>  the wait queue of a lock, entries numbered in arrival order;
                               exists only while it has entries. An entry is a directory
                               holding one record, named by the wait's token, as a lock
                               holds its grant; the record's mtime is the moment its turn
                               began
    <name>.q/<ticket>/@        a copy of the entry's record (when the record is a symlink),
                               read in one call by whoever knows only the ticket
    <name>.q/.new-<token>/     an entry being built, renamed to its ticket whole
    <name>.bell-<token>        the doorbell of a waiting head (a FIFO, `sleep.py`)
    <name>.shared/<agent hash> a shared hold of lock `name`: the member's full holder record
                               (`"mode":"shared"`); the directory exists only while it has
                               members (`shared_holds.py`)
    <card>.card                a holder card: the part of holder records that stays the same
                               from grant to grant (agent, process, key, checkout), named by
                               a hash of its text, written once and shared by every grant
                               that names it

Records are the target of a symlink (one atomic syscall, read with readlink, never followed),
or a small file when too long for a symlink target. A grant's record is short,
`@<card>:<acquired at>`: under the length a file system keeps inside the symlink's inode
(60 bytes on ext4, 128 on tmpfs), so a grant allocates no data block or page; readers see
it spelled out in full, the card's text with the token and the time added (`LockDir.read_lock`).
Full records (an agent's claim on its id, `crossproc/agent_claims.py`) read as they are.

Publishing a lock: build the staging directory with the record inside, then `rename` it onto
`<name>.lock`. The rename is atomic and fails (ENOTEMPTY/EEXIST) while the lock directory holds
a record, so a lock appears with its whole record or not at all, and a reader never sees a
half-written holder. An empty `<name>.lock/` is a lock in mid-release: held by nobody, and the
next rename replaces it.

Releasing by token: `unlink(<name>.lock/<token>)`, then `rmdir(<name>.lock)` (or the rename of
the head's staged grant onto it). The unlink succeeds for exactly one caller and only while
that grant is the current one, so neither a double release nor a release racing a cleanup can
remove somebody else's fresh lock; the rmdir fails harmlessly if a new holder already renamed
its lock in.

Queue entries are removed by token the same way: `unlink(<name>.q/<ticket>/<token>)`, then
`rmdir` of the emptied entry and of the queue. A ticket is taken again once its entry and
every entry after it are gone, so a waiter dropped by name could be a newcomer queued under
the ticket since; by token, a dead or stalled waiter's removal never touches another's entry.
An emptied entry directory (its remover died before the rmdir) reads as no entry, and the
next entry built under that ticket replaces it.

Whoever knows only an entry's ticket (a release looking for the first waiter, a waiter
reading its predecessor) would have to list the entry to learn its token. The entry's copy
of its record, `<ticket>/@`, spares that: one `readlink`. It is built with the entry and is
the first thing a removal unlinks, before the record: so while the copy exists, the record
it copies is the entry's (an entry is never built again under its ticket while it holds
anything). A removal that finds the entry is not its wait's has unlinked that wait's copy
all the same: harmless, readers then list the entry as they do when there is no copy.

One class per kind of entry, each reached from `LockDir` (the directory itself and its
locks): `Stagings` (`LockDir.stagings`), `QueueEntries` (`LockDir.queues`) and `HolderCards`
(`LockDir.cards`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import stat
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..errors import CorruptRecordError, LockDirError, LockDirFullError
from ..own_files import NotOwnFileError, read_own_file
from .location import default_lock_dir_path

if TYPE_CHECKING:
    from ..records import HolderRecord, WaiterRecord

LOCK_SUFFIX: Final = ".lock"
QUEUE_SUFFIX: Final = ".q"
STAGING_MARK: Final = ".tmp-"
BELL_MARK: Final = ".bell-"
NEW_ENTRY_MARK: Final = ".new-"
"""A queue entry being built (`QueueEntries.enqueue`), before it is renamed to its ticket."""
RECORD_COPY: Final = "@"
"""A queue entry's copy of its record, under a name known without listing the entry (a
token is never this name)."""
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


def shared_entry_exists(dir_fd: int, name: str) -> bool:
    """Whether lock `name` may have members: its `<name>.shared` entry is there (one
    `faccessat` in the directory `dir_fd`; none while nobody reads it)."""
    return os.access(f"{name}{SHARED_SUFFIX}", os.F_OK, dir_fd=dir_fd, follow_symlinks=False)


def default_lock_dir() -> Path:
    """The lock directory when nobody names one (`location.default_lock_dir_path`)."""
    try:
        return Path(default_lock_dir_path())
    except ValueError as exc:
        raise LockDirError(str(exc)) from None


def _refuse_unsafe(path: str, info: os.stat_result) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise LockDirError(
            f"lock directory {path} is a symlink; refusing to follow it. "
            "Remove it or point LOCKYARD_LOCK_DIR at a private directory"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise LockDirError(f"lock directory {path} exists and is not a directory")
    if info.st_uid != os.geteuid():
        raise LockDirError(
            f"lock directory {path} belongs to uid {info.st_uid}, not to you "
            f"(uid {os.geteuid()}); use a directory of your own"
        )


def _refuse_open_to_all(path: str, info: os.stat_result) -> None:
    """A directory lockyard did not create is used as it is, never chmodded (it is the user's:
    a shared 1777 directory, a 0755 one with their files); but one that every user may write
    in is no place for locks, since anyone could plant or remove entries there."""
    if info.st_mode & stat.S_IWOTH:
        raise LockDirError(
            f"lock directory {path} is writable by every user (mode "
            f"{stat.S_IMODE(info.st_mode):o}): anyone could plant or remove locks in it, so "
            "lockyard does not use it (and leaves it as it is); use a directory only you can "
            "write: the default, a new one lockyard creates, or one made with `mkdir -m 700`"
        )


class LockDir:
    """One private lock directory, held open; every operation is relative to its fd.

    Its locks are handled here; its stagings by `stagings`, its queues by `queues`, its
    holder cards by `cards` (the classes below)."""

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        """`read_only`: for inspecting (`lockyard status`): the directory must exist and is
        not created (reading it changes nothing). A directory lockyard creates is 0700; one
        that existed is never chmodded (`_refuse_open_to_all`)."""
        absolute = os.path.abspath(os.fspath(path))
        if "\x00" in absolute:
            raise LockDirError(f"lock directory {absolute!r} contains a NUL byte; remove it")
        parent = os.path.dirname(absolute)
        created = False
        try:
            if not read_only:
                os.makedirs(parent, mode=0o700, exist_ok=True)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(absolute, 0o700)
                    created = True
            info = os.lstat(absolute)
            _refuse_unsafe(absolute, info)
            if created and stat.S_IMODE(info.st_mode) != 0o700:  # ours: 0700 whatever the umask
                os.chmod(absolute, 0o700, follow_symlinks=False)
            elif not read_only:
                _refuse_open_to_all(absolute, info)
            self.fd: int = os.open(absolute, DIR_FLAGS)
        except LockDirError:
            raise
        except OSError as error:
            raise LockDirError(f"cannot use lock directory {absolute}: {error}") from None
        opened = os.fstat(self.fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            os.close(self.fd)
            raise LockDirError(f"lock directory {absolute} was swapped while being opened")
        self.path: str = os.path.realpath(absolute)
        self.stagings = Stagings(self)
        self.queues = QueueEntries(self)
        self.cards = HolderCards(self)
        # Closed with the object too: a store dropped without close() must not leak its fd.
        self._closer = weakref.finalize(self, os.close, self.fd)

    def make_dir(self, entry: str, *, exist_ok: bool = True) -> bool:
        """Create directory `entry` here: True when created, False when it existed (with
        `exist_ok`; else FileExistsError). The lock directory removed or its file system
        full are the store's errors."""
        try:
            os.mkdir(entry, 0o700, dir_fd=self.fd)
        except FileExistsError:
            if exist_ok:
                return False
            raise
        except FileNotFoundError:
            raise self.removed() from None
        except OSError as error:
            if error.errno in NO_SPACE:
                raise self.full() from None
            raise
        return True

    def removed(self) -> LockDirError:
        return LockDirError(
            f"lock directory {self.path} was removed while in use; "
            "nothing can be locked there any more: create the store again"
        )

    def full(self) -> LockDirFullError:
        return LockDirFullError(
            f"the lock directory {self.path} is full (no space left on its file system), so "
            "nothing could be written there. Free space on that file system (or make it "
            "bigger), or point LOCKYARD_LOCK_DIR at a directory on another one"
        )

    def close(self) -> None:
        self._closer()  # runs once: later calls do nothing
        self.fd = -1

    def exists(self, entry: str) -> bool:
        if "/" not in entry and self.fd >= 0:
            # An entry of the open directory itself: faccessat answers without the cost of an
            # exception for the usual "absent" (only ENOENT can fail here).
            return os.access(entry, os.F_OK, dir_fd=self.fd, follow_symlinks=False)
        try:
            os.lstat(entry, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        return True

    def open_own_dir(self, entry: str) -> int | None:
        """A directory entry of ours, opened without following symlinks; None when absent.

        Anything else (a symlink, a file, another user's directory) is refused: following
        it would write or read where the store has no business."""
        try:
            entry_fd = os.open(entry, DIR_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise entry_error(entry, error) from None
            raise
        try:
            owner = os.fstat(entry_fd).st_uid
        except FileNotFoundError:  # removed since the open (FUSE reports it so): absent
            os.close(entry_fd)
            return None
        if owner != os.geteuid():
            os.close(entry_fd)
            raise LockDirError(
                f"{entry} in the lock directory belongs to uid {owner}, not to you; "
                "something else put it there. Remove it to unblock that lock"
            )
        return entry_fd

    def names(self) -> list[str]:
        try:
            return os.listdir(self.fd)
        except FileNotFoundError:
            raise self.removed() from None

    def names_in(self, entry: str) -> list[str]:
        """The names in directory `entry` of ours (empty when it is absent)."""
        entry_fd = self.open_own_dir(entry)
        if entry_fd is None:
            return []
        try:
            return os.listdir(entry_fd)
        except FileNotFoundError:
            return []  # removed after we opened it (FUSE says so)
        finally:
            os.close(entry_fd)

    def names_with(self, suffix: str) -> list[str]:
        """The lock names that have an entry ending in `suffix` (locks, or queues)."""
        return [entry[: -len(suffix)] for entry in self.names() if entry.endswith(suffix)]

    # -- locks -------------------------------------------------------------------------

    def lock_exists(self, name: str) -> bool:
        """Lock `name` exists: held, or empty in mid-release (one `faccessat`)."""
        return os.access(name + LOCK_SUFFIX, os.F_OK, dir_fd=self.fd, follow_symlinks=False)

    def holds(self, name: str, token: str) -> bool:
        """Whether grant `token` is the current grant of lock `name` (one `faccessat`)."""
        return os.access(
            f"{name}{LOCK_SUFFIX}/{token}", os.F_OK, dir_fd=self.fd, follow_symlinks=False
        )

    def publish(self, name: str, token: str, record: str) -> bool:
        """Atomically create lock `name` holding `record` under `token`; False if taken."""
        staging = f"{name}{STAGING_MARK}{token}"
        self.make_dir(staging, exist_ok=False)
        try:
            write_record(self.fd, f"{staging}/{token}", record)
            os.rename(staging, name + LOCK_SUFFIX, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError as error:
            self.stagings.discard_staging(staging, token)
            if error.errno in BUSY:
                return False
            if error.errno == errno.ENOENT:  # staging reaped by reclaim_stale meanwhile
                return False
            if error.errno in (errno.ENOTDIR, errno.EISDIR):
                raise entry_error(name + LOCK_SUFFIX, error) from None
            if error.errno in NO_SPACE:
                raise self.full() from None
            raise
        return True

    def drop_grant(self, name: str, token: str) -> bool:
        """Remove grant `token` of lock `name` (False, touching nothing, when it is not the
        current grant). The lock is then an empty directory: held by nobody, taken by the
        next rename onto it, and removed by `free`."""
        try:
            os.unlink(f"{name}{LOCK_SUFFIX}/{token}", dir_fd=self.fd)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def free(self, name: str) -> None:
        """Remove lock `name`, emptied by `drop_grant`; fails harmlessly when a new holder
        already renamed its lock in. (try/except, not contextlib.suppress: this runs on every
        release, and a context manager costs more.)"""
        try:  # noqa: SIM105
            os.rmdir(name + LOCK_SUFFIX, dir_fd=self.fd)
        except OSError:
            pass

    def remove_lock(self, name: str, token: str) -> bool:
        """Release grant `token` of lock `name` and remove the lock (for records that are no
        lock of the line: an agent's claim on its id); False when not current."""
        if not self.drop_grant(name, token):
            return False
        self.free(name)
        return True

    def read_lock(self, name: str) -> tuple[str, str] | None:
        """(token, record text) of the current holder of `name`, or None when free."""
        return self.read_grant_entry(name + LOCK_SUFFIX)

    def read_holder(self, name: str) -> HolderRecord | None:
        """The holder of lock `name`, or None when free; CorruptRecordError when unreadable."""
        found = self.read_lock(name)
        if found is None:
            return None
        token, text = found
        from ..records import decode_holder  # pydantic: a hook that only looks never needs it

        record = decode_holder(text, f"{name}{LOCK_SUFFIX}/{token}")
        if record.token != token:
            raise CorruptRecordError(f"{name}{LOCK_SUFFIX}/{token} records token {record.token}")
        return record

    def grant_token(self, name: str) -> str | None:
        """The token of the one grant in lock `name` (its record unread), or None when the
        lock is free or holds anything but one grant."""
        entry_fd = self.open_own_dir(name + LOCK_SUFFIX)
        if entry_fd is None:
            return None
        try:
            tokens = [t for t in os.listdir(entry_fd) if not t.endswith(PARTIAL_SUFFIX)]
        except FileNotFoundError:
            return None
        finally:
            os.close(entry_fd)
        return tokens[0] if len(tokens) == 1 else None

    def read_grant_entry(self, entry: str) -> tuple[str, str] | None:
        """(token, record text) of the one grant in directory `entry` (a lock, or a staging),
        spelled out in full; None when there is none. (Also a queue entry's record, or the
        record of one being built: beside its copy, `RECORD_COPY`.)"""
        copy = RECORD_COPY if f"{QUEUE_SUFFIX}/" in entry else None
        missing: str | None = None
        for _attempt in range(3):
            missing = None
            entry_fd = self.open_own_dir(entry)
            if entry_fd is None:
                return None
            try:
                try:
                    listed = os.listdir(entry_fd)
                except FileNotFoundError:
                    # Removed after we opened it (a release). Local file systems list a
                    # removed directory as empty; FUSE ones report it gone: same thing.
                    return None
                tokens = [t for t in listed if not t.endswith(PARTIAL_SUFFIX) and t != copy]
                if not tokens:
                    return None
                if len(tokens) > 1:
                    raise CorruptRecordError(
                        f"{entry} holds {len(tokens)} entries, expected one grant"
                    )
                try:
                    text = read_record(entry_fd, tokens[0])
                except FileNotFoundError:
                    continue  # released between listing and reading: look again
                if not text.startswith(CARD_MARK):
                    return tokens[0], text
                full = self.cards.spelled_out(entry, tokens[0], text)
                if full is not None:
                    return tokens[0], full
                # Its card is gone: reclaimed with a dead holder's lock, which is then gone
                # too (look again), or removed by hand (unreadable, below).
                missing = f"{entry}/{tokens[0]}"
            finally:
                os.close(entry_fd)
        if missing is not None:
            raise CorruptRecordError(
                f"{missing} names a holder card that is gone (removed by hand?); "
                "remove the lock (lockyard clean) to unblock it"
            )
        return None


class Stagings:
    """The grants staged in a lock directory, each under its token."""

    def __init__(self, directory: LockDir) -> None:
        self._dir = directory

    def make_staging(self, name: str, token: str) -> bool:
        """Create the staging of grant `token` of lock `name`; False when it exists."""
        return self._dir.make_dir(f"{name}{STAGING_MARK}{token}")

    def write_staging(self, name: str, token: str, record: str) -> bool:
        """Put `record` in the staging of grant `token`; False when the staging is gone (a
        release renamed it, still empty, onto the lock). On any other failure the staging
        is discarded (a full file system: LockDirFullError)."""
        staging = f"{name}{STAGING_MARK}{token}"
        try:
            write_record(self._dir.fd, f"{staging}/{token}", record)
        except FileNotFoundError:
            return False
        except OSError as error:
            self.discard_staging(staging, token)
            if error.errno in NO_SPACE:
                raise self._dir.full() from None
            raise
        return True

    def rename_staging(self, name: str, token: str) -> bool | None:
        """Rename the staging of grant `token` onto lock `name`: True when done (the lock
        holds what the staging held), False while the lock holds a grant, None when there is
        no such staging."""
        try:
            os.rename(
                f"{name}{STAGING_MARK}{token}",
                name + LOCK_SUFFIX,
                src_dir_fd=self._dir.fd,
                dst_dir_fd=self._dir.fd,
            )
        except OSError as error:
            if error.errno in BUSY:
                return False
            if error.errno == errno.ENOENT:
                return None
            if error.errno in (errno.ENOTDIR, errno.EISDIR):
                raise entry_error(name + LOCK_SUFFIX, error) from None
            raise
        return True

    def unstage(self, name: str, token: str) -> bool:
        """Take back the record staged under `token` and remove its staging: False when
        there was none (never staged, or renamed onto the lock by a release: whichever of
        our unlink and that rename comes first decides)."""
        staging = f"{name}{STAGING_MARK}{token}"
        try:
            os.unlink(f"{staging}/{token}", dir_fd=self._dir.fd)
        except (FileNotFoundError, NotADirectoryError):
            return False
        self.discard_staging(staging, token)
        return True

    def discard_staging(self, staging: str, token: str) -> None:
        """Remove a staging, or a queue entry being built (and its record's copy)."""
        record = f"{staging}/{token}"
        for remove, entry in (
            (os.unlink, record),
            (os.unlink, record + PARTIAL_SUFFIX),
            (os.unlink, f"{staging}/{RECORD_COPY}"),
            (os.rmdir, staging),
        ):
            with contextlib.suppress(OSError):
                remove(entry, dir_fd=self._dir.fd)

    def staging_record(self, staging: str) -> tuple[str, str] | None:
        return self._dir.read_grant_entry(staging)


class QueueEntries:
    """The wait queues of a lock directory: `<name>.q/<ticket>/<token>`, one entry per waiter."""

    def __init__(self, directory: LockDir) -> None:
        self._dir = directory

    def queue_exists(self, name: str) -> bool:
        return os.access(name + QUEUE_SUFFIX, os.F_OK, dir_fd=self._dir.fd, follow_symlinks=False)

    def enqueue(self, name: str, token: str, record_for: Callable[[int], str]) -> str:
        """Add the entry of wait `token` to the queue of `name` and return its name (its
        ticket).

        The ticket is one more than the highest ticket in the queue, claimed by renaming the
        entry, built whole under a name of its own, onto it (the rename fails when an entry
        is there: then the next one is tried). So entries are numbered in the order they
        were created, whatever any process's clock says, and an entry appears with its
        record or not at all. `record_for(ticket)` gives the record to store.
        """
        queue = name + QUEUE_SUFFIX
        while True:
            self._dir.make_dir(queue)
            queue_fd = self._dir.open_own_dir(queue)
            if queue_fd is None:
                continue  # the last waiter removed the empty queue meanwhile: recreate it
            try:
                entry = _claim_ticket(queue_fd, token, record_for)
            except OSError as error:
                if error.errno not in NO_SPACE:
                    raise
                # Leave no empty queue behind (fails harmlessly if others queue there).
                with contextlib.suppress(OSError):
                    os.rmdir(queue, dir_fd=self._dir.fd)
                raise self._dir.full() from None
            finally:
                os.close(queue_fd)
            if entry is not None:
                return entry

    def dequeue(self, name: str, entry: str, token: str) -> bool:
        """Remove queue entry `entry` when it is wait `token`'s (False, removing nothing but
        the copy of its record, when it is not), and the queue when it became empty."""
        queue = name + QUEUE_SUFFIX
        # The copy first: while it exists, the record it copies is there (see the module's
        # docstring). When the entry is not this wait's, that wait loses its copy: harmless.
        try:  # noqa: SIM105 (try/except, not contextlib.suppress: this runs at every handoff)
            os.unlink(f"{queue}/{entry}/{RECORD_COPY}", dir_fd=self._dir.fd)
        except OSError:
            pass
        try:
            os.unlink(f"{queue}/{entry}/{token}", dir_fd=self._dir.fd)
        except (FileNotFoundError, NotADirectoryError):
            return False
        # (try/except, not contextlib.suppress: this runs at every handoff.)
        try:
            os.rmdir(f"{queue}/{entry}", dir_fd=self._dir.fd)
            os.rmdir(queue, dir_fd=self._dir.fd)  # fails while others queue
        except OSError:
            pass
        return True

    def queued(self, name: str, entry: str) -> bool:
        """Whether queue entry `entry` of `name` holds a wait (one `faccessat` when it is
        gone)."""
        return self.entry_token(name, entry) is not None

    def bears(self, name: str, entry: str, token: str) -> bool:
        """Whether queue entry `entry` of `name` is wait `token`'s (one `faccessat`)."""
        return os.access(
            f"{name}{QUEUE_SUFFIX}/{entry}/{token}",
            os.F_OK,
            dir_fd=self._dir.fd,
            follow_symlinks=False,
        )

    def entry_token(self, name: str, entry: str) -> str | None:
        """The wait token of queue entry `entry` (the name of its record); None when the
        entry is gone or holds anything but one waiter's record of that token.

        Read from the entry's copy of its record (one `readlink`), in the text as the store
        writes it (compact JSON) without decoding the whole record: this runs on every
        handoff. Without a copy, the entry is listed (`queue_record`)."""
        found = self._copied_record(name, entry)
        if found is None:
            found = self.queue_record(name, entry)
            if found is None:
                return None
        token, text = found
        if f'"token":{json.dumps(token)}' in text:
            return token
        try:
            fields = json.loads(text)
        except ValueError:
            return None
        return token if type(fields) is dict and fields.get("token") == token else None

    def _copied_record(self, name: str, entry: str) -> tuple[str, str] | None:
        """(token, record text) of queue entry `entry` as its copy of its record tells; None
        when it has no copy (gone, or listed then: see `entry_token`)."""
        try:
            text = os.readlink(f"{name}{QUEUE_SUFFIX}/{entry}/{RECORD_COPY}", dir_fd=self._dir.fd)
        except OSError:
            return None
        at = text.find('"token":"')
        if at < 0:
            return None
        at += 9
        until = text.find('"', at)
        token = text[at:until]
        if until < 0 or not token or "/" in token or "\\" in token or token == RECORD_COPY:
            return None  # it names files of the lock directory (and a plain token has no escapes)
        return token, text

    def queue_record(self, name: str, entry: str) -> tuple[str, str] | None:
        """(token, record text) of one queue entry, or None when there is no such entry (or
        what is there is not a record the store wrote)."""
        try:
            return self._dir.read_grant_entry(f"{name}{QUEUE_SUFFIX}/{entry}")
        except (LockDirError, CorruptRecordError):
            return None

    def waiter(self, name: str, entry: str) -> WaiterRecord | None:
        """The record of queue entry `entry`, None when it is gone or no waiter's record."""
        found = self._copied_record(name, entry) or self.queue_record(name, entry)
        return None if found is None else _decoded(name, entry, *found)

    def queue_order(self, name: str) -> list[str]:
        """The entry names of the queue of `name`, in arrival order (no records read)."""
        try:
            queue_fd = os.open(name + QUEUE_SUFFIX, DIR_FLAGS, dir_fd=self._dir.fd)
        except OSError:
            return []  # no queue; one that is not a directory is reported by queue_entries
        return _sorted_tickets(queue_fd)

    def checked_queue_order(self, name: str) -> list[str]:
        """`queue_order`; a queue that is not a directory of ours raises LockDirError (as
        `queue_entries` does) instead of reading as empty."""
        queue_fd = self._dir.open_own_dir(name + QUEUE_SUFFIX)
        return [] if queue_fd is None else _sorted_tickets(queue_fd)

    def stamp_turn(self, name: str, entry: str, token: str) -> bool:
        """Record now as the moment the turn of wait `token`, at queue entry `entry`, began
        (its record's mtime); False when it is not there (it left meanwhile: it needs no
        turn)."""
        # An explicit time: the kernel's own "now" is only as fine as a clock tick, so a stamp
        # soon after the entry was created could leave its mtime unchanged, and a waiter
        # learns from a changed mtime that it is first (see `line._in_line`).
        now = time.time_ns()
        try:
            os.utime(
                f"{name}{QUEUE_SUFFIX}/{entry}/{token}",
                ns=(now, now),
                dir_fd=self._dir.fd,
                follow_symlinks=False,
            )
        except OSError:
            return False
        return True

    def turn_stamp(self, name: str, entry: str, token: str) -> int | None:
        """The mtime of the record of wait `token` at queue entry `entry` in nanoseconds,
        or None when it is not there."""
        try:
            path = f"{name}{QUEUE_SUFFIX}/{entry}/{token}"
            return os.lstat(path, dir_fd=self._dir.fd).st_mtime_ns
        except (FileNotFoundError, NotADirectoryError):
            return None

    def turn_started(self, name: str, entry: str, token: str) -> float | None:
        """When wait `token` at queue entry `entry` got its turn (or was queued), or None
        when it is not there."""
        try:
            path = f"{name}{QUEUE_SUFFIX}/{entry}/{token}"
            return os.lstat(path, dir_fd=self._dir.fd).st_mtime
        except (FileNotFoundError, NotADirectoryError):
            return None

    def queue_entries(self, name: str) -> list[tuple[str, str, str]]:
        """(entry name, token, record text) of the queue of `name`, in arrival order."""
        queue_fd = self._dir.open_own_dir(name + QUEUE_SUFFIX)
        if queue_fd is None:
            return []
        try:
            try:
                listed = os.listdir(queue_fd)
            except FileNotFoundError:
                return []  # the last waiter removed the queue after we opened it (FUSE)
        finally:
            os.close(queue_fd)
        entries = []
        for entry in sorted(listed):
            if not _is_ticket(entry):
                continue  # an entry being built, or not the store's
            found = self.queue_record(name, entry)
            if found is not None:  # else that waiter left, or it is not a waiter's record
                entries.append((entry, *found))
        return entries

    def unfinished(self, name: str) -> list[tuple[str, str]]:
        """(entry, wait token) of the entries of the queue of `name` still being built
        (`enqueue`), each entry named relative to the lock directory, as a staging is."""
        queue = name + QUEUE_SUFFIX
        try:
            listed = self._dir.names_in(queue)
        except LockDirError:
            return []
        return [
            (f"{queue}/{entry}", entry[len(NEW_ENTRY_MARK) :])
            for entry in listed
            if entry.startswith(NEW_ENTRY_MARK)
        ]

    def remove_emptied(self, name: str) -> None:
        """Remove the entries of the queue of `name` that hold no record (their remover died
        before removing them: an entry is never empty otherwise, so whatever is renamed onto
        one meanwhile makes the removal fail), and the queue once it is empty."""
        queue = name + QUEUE_SUFFIX
        try:
            listed = self._dir.names_in(queue)
        except LockDirError:
            return
        for entry in listed:
            if _is_ticket(entry):
                with contextlib.suppress(OSError):
                    os.rmdir(f"{queue}/{entry}", dir_fd=self._dir.fd)
        with contextlib.suppress(OSError):
            os.rmdir(queue, dir_fd=self._dir.fd)

    def read_queue(self, name: str) -> list[tuple[str, WaiterRecord]]:
        """(entry, record) of every waiter of lock `name`, in arrival order."""
        entries = []
        for entry, token, text in self.queue_entries(name):
            waiter = _decoded(name, entry, token, text)
            if waiter is not None:  # not written by a store: ignored, never obeyed
                entries.append((entry, waiter))
        return entries

    def scan_queue(self, name: str) -> list[tuple[str, WaiterRecord]]:
        """`read_queue` for whole-directory scans: an unsafe entry is skipped, not fatal."""
        try:
            return self.read_queue(name)
        except LockDirError:
            return []


def _decoded(name: str, entry: str, token: str, text: str) -> WaiterRecord | None:
    """The waiter's record `text` of queue entry `entry`, named `token`; None when it is not
    a waiter's record of that token (never obeyed)."""
    from ..records import decode_waiter  # pydantic: loaded when first needed

    try:
        waiter = decode_waiter(text, f"{name}{QUEUE_SUFFIX}/{entry}/{token}")
    except CorruptRecordError:
        return None
    return waiter if waiter.token == token else None


def _claim_ticket(queue_fd: int, token: str, record_for: Callable[[int], str]) -> str | None:
    """Build the entry of wait `token` and rename it onto the next free ticket of the open
    queue; None when the queue was removed."""
    building = f"{NEW_ENTRY_MARK}{token}"
    try:
        os.mkdir(building, 0o700, dir_fd=queue_fd)
    except FileNotFoundError:
        return None  # removed after we opened it (it was empty): make it again
    record = f"{building}/{token}"
    copy = f"{building}/{RECORD_COPY}"
    renamed = False
    try:
        while True:
            listed = os.listdir(queue_fd)
            tickets = [int(entry[:TICKET_DIGITS]) for entry in listed if _is_ticket(entry)]
            ticket = max(tickets, default=0) + 1
            entry = f"{ticket:0{TICKET_DIGITS}d}"
            text = record_for(ticket)
            write_record(queue_fd, record, text)
            if len(text) <= _SYMLINK_RECORD_MAX:  # a record file has no copy: it is listed
                os.symlink(text, copy, dir_fd=queue_fd)
            try:
                # Onto nothing, or onto an emptied entry (its remover died before removing
                # it): a directory holding a record stays.
                os.rename(building, entry, src_dir_fd=queue_fd, dst_dir_fd=queue_fd)
            except OSError as error:
                if error.errno not in (*BUSY, errno.ENOTDIR):
                    raise
                os.unlink(record, dir_fd=queue_fd)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(copy, dir_fd=queue_fd)
                continue  # somebody took that ticket first: read the queue again
            renamed = True
            return entry
    finally:
        if not renamed:  # an error: take back what was built
            for remove, path in ((os.unlink, record), (os.unlink, copy), (os.rmdir, building)):
                with contextlib.suppress(OSError):
                    remove(path, dir_fd=queue_fd)


def _is_ticket(entry: str) -> bool:
    return entry[:TICKET_DIGITS].isdigit() and not entry.endswith(PARTIAL_SUFFIX)


def _sorted_tickets(queue_fd: int) -> list[str]:
    """The ticket entries of an open queue, sorted (the queue closed after)."""
    try:
        names = os.listdir(queue_fd)
    except FileNotFoundError:
        return []  # removed after we opened it (FUSE says so; local file systems: empty)
    finally:
        os.close(queue_fd)
    return sorted(entry for entry in names if _is_ticket(entry))


_CARD_HASH_CHARS: Final = 24
_CARDS_REMEMBERED: Final = 4096


class HolderCards:
    """The holder cards of a lock directory: `<card>.card`, the unchanging part of the holder
    records of the grants that name it."""

    def __init__(self, directory: LockDir) -> None:
        self._dir = directory
        self._known: dict[str, str] = {}
        """card name -> its text, as read or written here (a card's name is a hash of its
        text, and a card never changes: remembering it is never stale)."""

    def write(self, text: str) -> str:
        """The name of the holder card holding `text` (a JSON object), written if missing."""
        card = hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()[:_CARD_HASH_CHARS]
        try:
            write_record(self._dir.fd, card + CARD_SUFFIX, text)
        except FileExistsError:
            try:
                there = self.read(card)
            except CorruptRecordError:
                there = None
            if there != text:  # a card is only ever written whole: this is something else
                raise LockDirError(
                    f"{card}{CARD_SUFFIX} in the lock directory is not the card the store "
                    "wrote; something else put it there. Remove it"
                ) from None
        except FileNotFoundError:
            raise self._dir.removed() from None
        except OSError as error:
            if error.errno in NO_SPACE:
                raise self._dir.full() from None
            raise
        self._remember(card, text)
        return card

    def read(self, card: str) -> str | None:
        """The text of holder card `card`, or None when there is no such card; a card
        whose text does not hash to its name is not one the store wrote (CorruptRecordError)."""
        known = self._known.get(card)
        if known is not None:
            return known
        try:
            text = read_record(self._dir.fd, card + CARD_SUFFIX)
        except (FileNotFoundError, NotADirectoryError):
            return None
        digest = hashlib.sha256(text.encode(errors="surrogatepass")).hexdigest()
        if digest[:_CARD_HASH_CHARS] != card:
            raise CorruptRecordError(f"{card}{CARD_SUFFIX} holds a text of another card")
        self._remember(card, text)
        return text

    def _remember(self, card: str, text: str) -> None:
        if len(self._known) >= _CARDS_REMEMBERED:
            self._known.clear()
        self._known[card] = text

    def spelled_out(self, entry: str, token: str, text: str) -> str | None:
        """Grant record `@<card>:<acquired at>` as the full holder record; None when the
        card is gone."""
        card, colon, acquired_at = text[1:].partition(":")
        try:
            moment = float(acquired_at)
        except ValueError:
            moment = math.nan
        if not colon or not math.isfinite(moment) or not card.isalnum():
            raise CorruptRecordError(f"{entry}/{token} holds {text!r}, not a grant record")
        card_text = self.read(card)
        if card_text is None:
            return None
        if not card_text.endswith("}"):
            raise CorruptRecordError(f"{card}{CARD_SUFFIX} is not a JSON object")
        return f'{card_text[:-1]},"token":{json.dumps(token)},"acquired_at":{moment!r}}}'

    def names(self) -> list[str]:
        """The names of the holder cards in the directory."""
        return self._dir.names_with(CARD_SUFFIX)

    def named_in(self, entry: str) -> set[str]:
        """The holder cards that the grant records in directory `entry` (a lock, or a
        staging) name; empty when it is no directory of ours."""
        try:
            entry_fd = self._dir.open_own_dir(entry)
        except LockDirError:
            return set()
        if entry_fd is None:
            return set()
        named = set()
        try:
            for token in os.listdir(entry_fd):
                with contextlib.suppress(OSError):
                    text = os.readlink(token, dir_fd=entry_fd)
                    if text.startswith(CARD_MARK):
                        named.add(text[1:].partition(":")[0])
        except OSError:
            pass
        finally:
            os.close(entry_fd)
        return named

    def remove(self, card: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(card + CARD_SUFFIX, dir_fd=self._dir.fd)
        self._known.pop(card, None)
