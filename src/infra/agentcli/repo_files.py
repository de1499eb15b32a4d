"""Where a configuration file really is, and reading and writing it without surprises.

`lockyard init` edits files a person owns, found by name in a repository that may have come
from anywhere. So:

- **Nothing outside the repository** unless the person asks for it in so many words
  (`--write-outside-repo`): a cloned repository can carry `.claude -> ~/.claude`, and
  following it would put lockyard's hooks into every project of that user. Every name is
  resolved (all its symlinks) and checked against the repository's real root first.
- **A symlink stays a symlink**: a file reached through links inside the repository is
  edited at its target, never replaced by a regular file.
- **Only regular files** are read: a FIFO, socket or device at a configuration file's name is
  refused before it is opened (and opened non-blocking, then checked again), so nothing can
  make `init` wait forever. A file with other hard links is refused too: the other names may
  be outside the repository.
- **Bytes in, bytes out**: read as UTF-8 without newline translation, written back exactly.
- **All or nothing**: every new text goes to a temp file beside its target first, each target
  is checked to still hold what was read (an editor may have saved meanwhile), and only then
  are they renamed into place. A file's permission bits are kept.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .config_errors import NOTHING_WRITTEN, ConfigFileError

MAX_BYTES: Final = 16 * 1024 * 1024
OUTSIDE_FLAG: Final = "--write-outside-repo"


@dataclass(frozen=True)
class Location:
    """A configuration file: the name the user knows, and where its bytes really are."""

    shown: Path
    real: Path
    outside: bool
    """Its bytes are outside the repository (allowed only with `outside_ok`)."""
    outside_ok: bool
    root: Path


def locate(root: Path, name: str | Path, *, outside_ok: bool) -> Location:
    """Where `name` (relative to the repository `root`, or absolute) really is; ConfigFileError
    when that is outside the repository and `outside_ok` is false."""
    shown = root / name
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(shown))
    outside = real != real_root and real_root not in real.parents
    if outside and not outside_ok:
        raise ConfigFileError(_outside_message(root, shown, real))
    return Location(shown, real, outside, outside_ok, root)


def _outside_message(root: Path, shown: Path, real: Path) -> str:
    via = ""
    if shown.is_relative_to(root):
        step = root
        for part in shown.relative_to(root).parts:
            step = step / part
            if step.is_symlink():
                via = f" ({step.relative_to(root)} is a symlink to {os.readlink(step)})"
                break
    return (
        f"{shown} leads outside the repository{via}: lockyard would write {real}, which "
        "other projects may share; it writes there only if you pass "
        f"{OUTSIDE_FLAG}; or make it a file or directory of the repository's own "
        f"{NOTHING_WRITTEN}"
    )


@dataclass(frozen=True)
class Snapshot:
    """What a file held when lockyard read it (`data` None: it did not exist)."""

    data: bytes | None
    mode: int | None = None

    @property
    def text(self) -> str | None:
        return None if self.data is None else self.data.decode("utf-8")


_KINDS: Final = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symlink that does not resolve (a loop?)",
}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read(location: Location) -> Snapshot:
    """The file's bytes, checked to be a regular UTF-8 file of sane size."""
    shown = location.shown
    try:
        status = os.lstat(location.real)
    except FileNotFoundError:
        _check_parents(location)
        return Snapshot(None)
    except OSError as exc:
        raise ConfigFileError(f"cannot read {shown}: {exc.strerror} {NOTHING_WRITTEN}") from None
    _check_regular(location, status)
    if status.st_nlink > 1 and not location.outside_ok:
        raise ConfigFileError(
            f"{shown} has {status.st_nlink} hard links: editing it would change its other "
            f"names too, which may be outside the repository; pass {OUTSIDE_FLAG} to edit it "
            f"anyway, or replace it with a copy of its own {NOTHING_WRITTEN}"
        )
    if status.st_size > MAX_BYTES:
        raise ConfigFileError(
            f"{shown} is {status.st_size} bytes, too large for a configuration file; lockyard "
            f"edits files up to {MAX_BYTES} bytes {NOTHING_WRITTEN}"
        )
    data = _read_bytes(location)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigFileError(
            f"{shown} is not UTF-8 text ({exc.reason} at byte {exc.start}); lockyard edits only "
            f"UTF-8 files {NOTHING_WRITTEN}"
        ) from None
    return Snapshot(data, stat.S_IMODE(status.st_mode))


def _check_regular(location: Location, status: os.stat_result) -> None:
    if not stat.S_ISREG(status.st_mode):
        raise ConfigFileError(
            f"{location.shown} is {_kind(status.st_mode)}, not a regular file: lockyard edits "
            f"only regular files; move it away, then run this again {NOTHING_WRITTEN}"
        )


def _read_bytes(location: Location) -> bytes:
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(location.real, flags)
    except OSError as exc:
        raise ConfigFileError(
            f"cannot read {location.shown}: {exc.strerror} {NOTHING_WRITTEN}"
        ) from None
    try:
        _check_regular(location, os.fstat(fd))  # it may have been swapped since lstat
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BYTES:
                raise ConfigFileError(
                    f"{location.shown} grew past {MAX_BYTES} bytes while lockyard read it "
                    f"{NOTHING_WRITTEN}"
                )
        return b"".join(chunks)
    finally:
        os.close(fd)


def _check_parents(location: Location) -> None:
    """The nearest existing ancestor of an absent file must be a directory lockyard can enter."""
    parent = location.real.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigFileError(
            f"cannot create {location.shown}: {parent} is {_kind(os.lstat(parent).st_mode)}, "
            f"not a directory {NOTHING_WRITTEN}"
        )


@dataclass(frozen=True)
class Write:
    """One file's new bytes (None: delete it), and what it held when read."""

    location: Location
    before: Snapshot
    after: bytes | None


def apply(writes: list[Write]) -> None:
    """Write every file or none: temp files first, then each target checked to be unchanged,
    then the renames. ConfigFileError says what failed (and that nothing was written, unless
    a rename itself failed, which it names)."""
    staged: list[tuple[Write, Path | None]] = []
    made: list[Path] = []
    try:
        for write in writes:
            temp = None if write.after is None else _stage(write, made)
            staged.append((write, temp))
        for write in writes:
            _check_unchanged(write)
    except BaseException:
        for _, temp in staged:
            if temp is not None:
                with contextlib.suppress(OSError):
                    temp.unlink()
        for directory in reversed(made):
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise
    for index, (write, temp) in enumerate(staged):
        try:
            if temp is None:
                write.location.real.unlink(missing_ok=True)
                _remove_empty_parents(write.location)
            else:
                os.replace(temp, write.location.real)
        except OSError as exc:
            done = ", ".join(str(w.location.shown) for w, _ in staged[:index]) or "none"
            raise ConfigFileError(
                f"cannot write {write.location.shown}: {exc.strerror} (already written: {done})"
            ) from None


def _stage(write: Write, made: list[Path]) -> Path:
    real = write.location.real
    assert write.after is not None
    try:
        _make_parents(real.parent, made)
        temp = real.with_name(f".{real.name}.lockyard-{secrets.token_hex(6)}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temp, flags, 0o666 if write.before.mode is None else write.before.mode)
    except OSError as exc:
        raise ConfigFileError(
            f"cannot write {write.location.shown}: {exc.strerror} {NOTHING_WRITTEN}"
        ) from None
    try:
        if write.before.mode is not None:
            os.fchmod(fd, write.before.mode)  # the umask does not narrow a file's old mode
        view = memoryview(write.after)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise ConfigFileError(
            f"cannot write {write.location.shown}: {exc.strerror} {NOTHING_WRITTEN}"
        ) from None
    os.close(fd)
    return temp


def _make_parents(directory: Path, made: list[Path]) -> None:
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        path.mkdir()
        made.append(path)


def _check_unchanged(write: Write) -> None:
    location = write.location
    try:
        now = _read_bytes(location) if location.real.exists() else None
    except ConfigFileError:
        now = b"\0changed"
    if now != write.before.data:
        raise ConfigFileError(
            f"{location.shown} changed while lockyard was editing it; run this again "
            f"{NOTHING_WRITTEN}"
        )


def _remove_empty_parents(location: Location) -> None:
    """Remove the directories between a deleted file and the repository root while they are
    empty (`.claude/` once its settings are gone); never through a symlink, never the root."""
    if not location.shown.is_relative_to(location.root):
        return
    directory = location.shown.parent
    while directory != location.root and location.root in directory.parents:
        if directory.is_symlink():
            return
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
