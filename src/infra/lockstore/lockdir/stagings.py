"""The stagings of a lock directory: `<name>.tmp-<token>/<token>`, a grant being published, or
staged by a queue's head for a release to rename onto the lock (`layout.py`)."""

from __future__ import annotations

import contextlib
import errno
import os
from typing import TYPE_CHECKING

from .layout import (
    BUSY,
    LOCK_SUFFIX,
    NO_SPACE,
    PARTIAL_SUFFIX,
    STAGING_MARK,
    entry_error,
    write_record,
)

if TYPE_CHECKING:
    from .disk import LockDir


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
        record = f"{staging}/{token}"
        for remove, entry in (
            (os.unlink, record),
            (os.unlink, record + PARTIAL_SUFFIX),
            (os.rmdir, staging),
        ):
            with contextlib.suppress(OSError):
                remove(entry, dir_fd=self._dir.fd)

    def staging_record(self, staging: str) -> tuple[str, str] | None:
        return self._dir.read_grant_entry(staging)
