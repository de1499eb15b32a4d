"""The lock directory held open, and its locks: the atomic operations the line takes and
gives back a lock with (`layout.py` says how the entries are named and written).

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

The other kinds of entries have a class each, reached from `LockDir`: `stagings.Stagings`,
`queues.QueueEntries`, `cards.HolderCards`. None decides anything: the line (`line.py`) does,
through these operations.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CorruptRecordError, LockDirError, LockDirFullError
from .cards import HolderCards
from .layout import (
    BUSY,
    CARD_MARK,
    DIR_FLAGS,
    LOCK_SUFFIX,
    NO_SPACE,
    PARTIAL_SUFFIX,
    STAGING_MARK,
    entry_error,
    read_record,
    write_record,
)
from .location import default_lock_dir_path
from .queues import QueueEntries
from .stagings import Stagings

if TYPE_CHECKING:
    from ..records import HolderRecord

__all__ = ["LockDir", "default_lock_dir"]


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
    holder cards by `cards`."""

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
        spelled out in full; None when there is none."""
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
                tokens = [t for t in listed if not t.endswith(PARTIAL_SUFFIX)]
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
