"""A version of a file: its content digest, and the stat signature that usually proves it.

Comparing digests is exact but reads the whole file; comparing `stat` is one system call but
not exact: a file rewritten with the same size within one tick of the kernel's coarse clock
keeps its mtime and ctime. Git's index has the same problem ("racily clean" entries) and the
same answer, taken here: a signature is trusted only when the file had not been changed for
`RACY_SECONDS` when it was taken, so a later change must move mtime or ctime; otherwise the
digest decides. ctime is in the signature because nobody can set it back (`touch -d` sets
mtime only), and the inode because an editor's save-by-rename makes a new one.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from dataclasses import dataclass
from typing import Final

ABSENT: Final = "absent"
"""The digest of a file that does not exist."""
NOT_A_FILE: Final = "not-a-file"
"""The digest of a directory, socket, FIFO...: only its signature tells versions apart."""
RACY_SECONDS: Final = 2.0
"""How long a file must have been left alone before its stat signature alone is trusted (the
coarse clock ticks every few milliseconds; network file systems keep seconds)."""
_CHUNK: Final = 1 << 20

Signature = tuple[int, int, int, int, int]
"""(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)."""


@dataclass(frozen=True, slots=True)
class FileVersion:
    digest: str
    """blake2b-128 of the content in hex, `ABSENT` or `NOT_A_FILE`."""
    signature: Signature | None
    """None when the file does not exist."""
    trusted: bool
    """Whether an equal signature alone proves the same content later (not racily taken)."""

    def to_json(self) -> dict[str, object]:
        return {"digest": self.digest, "sig": list(self.signature or ()), "trusted": self.trusted}

    @classmethod
    def from_json(cls, data: object) -> FileVersion | None:
        if not isinstance(data, dict):
            return None
        digest, sig, trusted = data.get("digest"), data.get("sig"), data.get("trusted")
        if not isinstance(digest, str) or not isinstance(sig, list) or type(trusted) is not bool:
            return None
        if sig and (len(sig) != 5 or not all(type(n) is int for n in sig)):
            return None
        signature: Signature | None = (sig[0], sig[1], sig[2], sig[3], sig[4]) if sig else None
        return cls(digest, signature, trusted)


def signature_of(st: os.stat_result) -> Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def version_of(path: str) -> FileVersion:
    """The version `path` has now (its digest read in full). A file that changes while it is
    read gets an untrusted signature, so the next comparison reads it again."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return FileVersion(ABSENT, None, True)
    except IsADirectoryError:
        return FileVersion(NOT_A_FILE, signature_of(os.stat(path)), True)
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            return FileVersion(NOT_A_FILE, signature_of(before), True)
        digest = hashlib.blake2b(digest_size=16)
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    signature = signature_of(after)
    return FileVersion(
        digest.hexdigest(), signature, signature == signature_of(before) and _settled(after)
    )


def _settled(st: os.stat_result) -> bool:
    """Whether the file was last changed long enough ago for its signature to be trusted."""
    age = time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns)
    return age >= RACY_SECONDS * 1e9  # a change time in the future is never settled


def stat_proves(seen: FileVersion, path: str) -> bool:
    """Whether one `stat` proves `path` still has version `seen` (False: it may not)."""
    if not seen.trusted or seen.signature is None:
        return False
    try:
        return signature_of(os.stat(path)) == seen.signature
    except OSError:
        return False


def still(seen: FileVersion, path: str) -> tuple[bool, FileVersion | None]:
    """Whether `path` still has version `seen`, and its version now when it had to be read
    (None when one `stat` proved it unchanged)."""
    if stat_proves(seen, path):
        return True, None
    current = version_of(path)
    if current.digest == NOT_A_FILE or seen.digest == NOT_A_FILE:
        return current.digest == seen.digest and current.signature == seen.signature, current
    return current.digest == seen.digest, current
